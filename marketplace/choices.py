"""Choices of the marketplace: what a hub item is, who may see it, and how hub lists sort."""

from django.db import models
from django.utils.translation import gettext_lazy as _


class HubKind(models.TextChoices):
    """A hub item holds model weights or a data set."""

    MODEL = "model", _("Model")
    DATASET = "dataset", _("Dataset")


class HubVisibility(models.TextChoices):
    PUBLIC = "public", _("Public")
    PRIVATE = "private", _("Private")


class HubSort(models.TextChoices):
    """How a hub list is ordered. Every order is total (ties broken by the id, or the unique repo name) so that
    pages never repeat or skip an item."""

    MOUNTS = "mounts", _("Most mounted")
    LIKES = "likes", _("Most liked")
    NEWEST = "newest", _("Newest")
    NAME = "name", _("Name")


HUB_ORDERING = {
    HubSort.MOUNTS: ("-mount_count", "-id"),
    HubSort.LIKES: ("-likes_count", "-id"),
    HubSort.NEWEST: ("-created_at", "-id"),
    HubSort.NAME: ("repo",),
}

# Where hub items appear inside an instance (SPEC §8): models and datasets are mounted read-only.
MOUNT_ROOTS = {HubKind.MODEL: "/root/public", HubKind.DATASET: "/root/datasets"}


# The image marketplace ---------------------------------------------------------------------------------


class ImageCategory(models.TextChoices):
    """Where an image sits in the marketplace. Community images are the users' own, listed after staff review."""

    XINCHUANG = "xinchuang", _("Xinchuang official")
    FRAMEWORK = "framework", _("Framework")
    CASE_STUDY = "case_study", _("Case study")
    COMMUNITY = "community", _("Community")


class ImageReview(models.TextChoices):
    """The review state of an image: private drafts, waiting for staff, listed for everyone, or rejected (with the
    reason the author sees). Platform images are listed from the start."""

    DRAFT = "draft", _("Private")
    PENDING = "pending", _("Waiting for review")
    LISTED = "listed", _("Listed")
    REJECTED = "rejected", _("Rejected")


# Every legal review move; anything else is a 409 with a message.
IMAGE_REVIEW_MOVES = {
    ImageReview.DRAFT: frozenset({ImageReview.PENDING}),
    ImageReview.PENDING: frozenset({ImageReview.LISTED, ImageReview.REJECTED}),
    ImageReview.REJECTED: frozenset({ImageReview.PENDING}),
    ImageReview.LISTED: frozenset(),
}

IMAGE_REVIEW_BADGES = {
    ImageReview.DRAFT: "secondary",
    ImageReview.PENDING: "warning",
    ImageReview.LISTED: "success",
    ImageReview.REJECTED: "danger",
}


class ImageStatus(models.TextChoices):
    """Whether an image can boot: a saved instance's image is ``saving`` while the system disk is snapshotted, an
    image imported from a registry ``importing`` until its files are unpacked and checked."""

    SAVING = "saving", _("Saving")
    IMPORTING = "importing", _("Importing")
    READY = "ready", _("Ready")
    FAILED = "failed", _("Failed")


class ImportStep(models.TextChoices):
    """How far the import of an image from a registry has come (shown on the image's page while it runs)."""

    QUEUED = "queued", _("Waiting for a worker")
    COPYING = "copying", _("Copying from the registry")
    UNPACKING = "unpacking", _("Unpacking the layers")
    CHECKING = "checking", _("Checking the files")
    DONE = "done", _("Done")


class ImageSort(models.TextChoices):
    """How the marketplace orders images; every order is total (ties broken by the id)."""

    POPULAR = "popular", _("Most used")
    NEWEST = "newest", _("Newest")
    RATING = "rating", _("Best rated")


IMAGE_ORDERING = {
    ImageSort.POPULAR: ("-usage_count", "sort_order", "-id"),
    ImageSort.NEWEST: ("-created_at", "-id"),
    ImageSort.RATING: ("-rating_average", "-rating_count", "-id"),
}


class OperatingSystem(models.TextChoices):
    """The OS families images are built on (the Xinchuang zone also offers the domestic ones)."""

    UBUNTU = "ubuntu", "Ubuntu"
    OPENEULER = "openeuler", "openEuler"
    KYLIN = "kylin", _("Kylin")
    UOS = "uos", "UOS"


# A variant without a chip family boots only in the no-card (CPU-only) mode.
CPU_ONLY = ""
