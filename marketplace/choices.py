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
