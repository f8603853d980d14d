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
