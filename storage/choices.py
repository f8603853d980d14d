"""Kinds of entries and states of uploads."""

from django.db import models
from django.utils.translation import gettext_lazy as _


class EntryKind(models.TextChoices):
    FOLDER = "folder", _("Folder")
    FILE = "file", _("File")


class UploadStatus(models.TextChoices):
    # An upload that fails (quota, expiry, termination) is deleted with its bytes, so there is no failed state.
    ACTIVE = "active", _("Uploading")
    COMPLETE = "complete", _("Complete")


class UsageSource(models.TextChoices):
    """Other parts of the console that keep a user's bytes and count them in the user's storage."""

    HUB = "hub", _("Published hub repositories")
    IMAGES = "images", _("Imported container images")


class DiskStatus(models.TextChoices):
    AVAILABLE = "available", _("Available")
    ATTACHING = "attaching", _("Attaching")
    ATTACHED = "attached", _("Attached")
    DETACHING = "detaching", _("Detaching")
    DELETED = "deleted", _("Deleted")


# States in which a disk belongs to an instance (and the instance column is set).
DISK_ON_INSTANCE = (DiskStatus.ATTACHING, DiskStatus.ATTACHED, DiskStatus.DETACHING)
DISK_BADGES = {
    DiskStatus.AVAILABLE: "secondary",
    DiskStatus.ATTACHING: "info",
    DiskStatus.ATTACHED: "success",
    DiskStatus.DETACHING: "info",
    DiskStatus.DELETED: "dark",
}


class DiskReason(models.TextChoices):
    CREATED = "created", _("Created")
    GROWN = "grown", _("Grown")
    ATTACH_REQUESTED = "attach_requested", _("Attach requested")
    ATTACHED = "attached", _("Attached")
    DETACH_REQUESTED = "detach_requested", _("Detach requested")
    DETACHED = "detached", _("Detached")
    INSTANCE_RELEASED = "instance_released", _("Detached: its instance was released")
    DELETED = "deleted", _("Deleted")
    ARREARS_NOTICE = "arrears_notice", _("Kept while the balance is in arrears")
    ARREARS_CLEARED = "arrears_cleared", _("Arrears cleared")
    ARREARS_REMINDER = "arrears_reminder", _("Deletion reminder: the balance is still in arrears")
    ARREARS_EXPIRED = "arrears_expired", _("Deleted: the retention period in arrears ended")
