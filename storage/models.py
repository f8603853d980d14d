"""Cloud storage (云存储): each user's folders and files, and the resumable uploads that fill them."""

import uuid

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _

from .choices import EntryKind, UploadStatus
from .querysets import EntryQuerySet, UploadQuerySet


class Entry(models.Model):
    """A folder or a file in a user's cloud storage.

    The database is the file system's index: the normalised ``path`` (``/a/b/c``) is unique per owner and the
    ``parent`` link makes a folder listing one indexed query. A file's bytes live in the ``cloudstorage`` storage
    backend under an opaque ``storage_key`` (``<owner public_id>/<entry public_id>``) that never changes, so a
    rename or move is a metadata update inside one transaction and never a copy of bytes.
    """

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="storage_entries")
    parent = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.CASCADE, related_name="children", verbose_name=_("folder")
    )
    kind = models.CharField(_("kind"), max_length=8, choices=EntryKind.choices)
    name = models.CharField(_("name"), max_length=255)
    path = models.CharField(_("path"), max_length=2048)
    size = models.PositiveBigIntegerField(_("size (bytes)"), default=0)
    checksum = models.CharField(_("SHA-256"), max_length=64, blank=True)
    content_type = models.CharField(_("content type"), max_length=255, blank=True)
    storage_key = models.CharField(max_length=255, blank=True, editable=False)
    created_at = models.DateTimeField(_("created"), auto_now_add=True)
    updated_at = models.DateTimeField(_("modified"), auto_now=True)

    objects = EntryQuerySet.as_manager()

    class Meta:
        verbose_name = _("storage entry")
        verbose_name_plural = _("storage entries")
        constraints = [
            models.UniqueConstraint(fields=["owner", "path"], name="storage_entry_unique_path"),
            models.CheckConstraint(
                condition=models.Q(kind="folder", size=0) | models.Q(kind="file"), name="storage_folder_has_no_size"
            ),
        ]
        indexes = [models.Index(fields=["owner", "parent", "kind", "name"], name="storage_entry_listing")]

    def __str__(self):
        return f"{self.owner_id}:{self.path}"

    @property
    def is_folder(self) -> bool:
        return self.kind == EntryKind.FOLDER


class Upload(models.Model):
    """A resumable upload (tus 1.0.0) into one of the user's folders.

    ``length`` is declared when the upload is created and is reserved against the quota until the upload
    completes or is removed. ``offset`` counts the bytes safely stored in the staging file
    ``STORAGE_STAGING_DIR/<public_id>.part``; a client resumes from it after an interruption. When the last
    byte arrives the staged file is moved into the storage backend and becomes ``entry``. An upload that is
    terminated, refused for quota, or left idle past its expiry is deleted together with its staged bytes.
    """

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="storage_uploads")
    folder = models.ForeignKey(
        Entry, null=True, blank=True, on_delete=models.CASCADE, related_name="uploads", verbose_name=_("folder")
    )
    filename = models.CharField(_("file name"), max_length=255)
    content_type = models.CharField(_("content type"), max_length=255, blank=True)
    length = models.PositiveBigIntegerField(_("length (bytes)"))
    offset = models.PositiveBigIntegerField(_("offset (bytes)"), default=0)
    status = models.CharField(_("status"), max_length=16, choices=UploadStatus.choices, default=UploadStatus.ACTIVE)
    entry = models.ForeignKey(
        Entry, null=True, blank=True, on_delete=models.SET_NULL, related_name="+", verbose_name=_("file")
    )
    created_at = models.DateTimeField(_("created"), auto_now_add=True)
    updated_at = models.DateTimeField(_("last activity"), auto_now=True)
    completed_at = models.DateTimeField(_("completed"), null=True, blank=True)

    objects = UploadQuerySet.as_manager()

    class Meta:
        verbose_name = _("upload")
        verbose_name_plural = _("uploads")
        indexes = [models.Index(fields=["status", "updated_at"], name="storage_upload_expiry")]

    def __str__(self):
        return f"{self.filename} ({self.offset}/{self.length})"

    @property
    def is_complete(self) -> bool:
        return self.status == UploadStatus.COMPLETE
