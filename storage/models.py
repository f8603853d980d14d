"""Cloud storage (云存储): each user's folders and files, and the resumable uploads that fill them."""

import uuid
from datetime import timedelta

from django.conf import settings
from django.db import models
from django.urls import reverse
from django.utils.translation import gettext_lazy as _

from core.attaching import DATA_ROOT, disk_folder_name
from core.labels import label_of

from .choices import DISK_BADGES, DISK_ON_INSTANCE, DiskReason, DiskStatus, EntryKind, UploadStatus, UsageSource
from .querysets import CloudDiskQuerySet, EntryQuerySet, HubMountQuerySet, UploadQuerySet


class Entry(models.Model):
    """A folder or a file in a user's cloud storage.

    The database is the file system's index: the normalised ``path`` (``/a/b/c``) is unique per owner and the
    ``parent`` link makes a folder listing one indexed query. With ``STORAGE=local`` a file's bytes are at its path
    in the account's tree (``storage.tree``; ``storage_key`` empty), the same files its machines see at
    ``/root/shared``, and the rows are refreshed from the tree when read. On S3 the bytes are under an opaque
    ``storage_key`` (``<owner public_id>/<entry public_id>``) that never changes, so a rename or move there is a
    metadata update and never a copy of bytes.
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


class StoredElsewhere(models.Model):
    """Bytes another part of the console keeps for a user (their published hub repositories), counted in their
    storage: the usage bar, the ceiling and GB-day billing read them beside the files. The part that keeps the
    bytes writes its total here (``storage.quota.record_elsewhere``) whenever it changes, since it sits above
    storage in the layers and storage cannot ask it."""

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    source = models.CharField(_("kept by"), max_length=16, choices=UsageSource.choices)
    size = models.BigIntegerField(_("size"))
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = _("storage kept elsewhere")
        verbose_name_plural = _("storage kept elsewhere")
        constraints = [models.UniqueConstraint(fields=["owner", "source"], name="stored_elsewhere_once_per_source")]

    def __str__(self):
        return f"{self.owner_id} {self.source}: {self.size}"


class CloudDisk(models.Model):
    """A cloud disk (云硬盘): ``size_gb`` GB in one zone, attached to at most one instance at a time.

    A disk lives in its zone's shared storage, not on a host, so it follows its instance to another node of the
    zone on a restart. It only grows. It is billed per GB-day from creation to deletion (a usage session of kind
    ``disk`` whose resource is ``public_id``), attached or not, and it outlives the instances it was attached to:
    releasing an instance detaches its disks. ``status`` and ``instance`` change only in ``storage.disks`` by
    compare-and-set, so two concurrent attaches cannot both win.
    """

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="cloud_disks")
    name = models.CharField(_("name"), max_length=64)
    size_gb = models.PositiveIntegerField(_("size (GB)"))
    zone = models.ForeignKey("catalog.Zone", on_delete=models.PROTECT, related_name="cloud_disks")
    status = models.CharField(_("status"), max_length=16, choices=DiskStatus.choices, default=DiskStatus.AVAILABLE)
    instance = models.ForeignKey(
        "instances.Instance",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="data_disks",
        verbose_name=_("attached to"),
    )
    arrears_since = models.DateTimeField(
        _("in arrears since"), null=True, blank=True, help_text=_("Kept for the retention period from then.")
    )
    arrears_reminders_sent = models.PositiveSmallIntegerField(
        _("deletion reminders sent"), default=0, help_text=_("Reset when the arrears are cleared.")
    )
    created_at = models.DateTimeField(_("created"), auto_now_add=True)
    updated_at = models.DateTimeField(_("updated"), auto_now=True)
    deleted_at = models.DateTimeField(_("deleted"), null=True, blank=True)

    objects = CloudDiskQuerySet.as_manager()

    class Meta:
        verbose_name = _("cloud disk")
        verbose_name_plural = _("cloud disks")
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["owner", "status"], name="clouddisk_owner_status")]
        constraints = [
            models.CheckConstraint(condition=models.Q(size_gb__gte=1), name="clouddisk_size_positive"),
            # The database itself keeps "attached" and "has an instance" in step.
            models.CheckConstraint(
                condition=models.Q(status__in=DISK_ON_INSTANCE, instance__isnull=False)
                | (~models.Q(status__in=DISK_ON_INSTANCE) & models.Q(instance__isnull=True)),
                name="clouddisk_instance_iff_attached",
            ),
            models.UniqueConstraint(
                fields=["owner", "name"], condition=~models.Q(status="deleted"), name="clouddisk_unique_live_name"
            ),
        ]

    def __str__(self):
        return f"{self.name} ({self.size_gb} GB, {self.public_id})"

    @property
    def kept_until(self):
        """While the owner is in arrears: when the retention period ends and the disk is deleted."""
        if self.arrears_since is None:
            return None
        return self.arrears_since + timedelta(days=settings.ARREARS_RETENTION_DAYS)

    @property
    def badge(self) -> str:
        return DISK_BADGES.get(self.status, "secondary")

    def get_status_display(self) -> str:
        return label_of(DiskStatus, self.status)

    @property
    def device_path(self) -> str:
        """Where the disk appears inside its instance, on every backend: ``/root/data/<its name>`` (the rule the
        backends follow, ``core.attaching.disk_folder``; a machine has no two disks of one name, as the
        owner has not)."""
        return f"{DATA_ROOT}/{disk_folder_name(self.name, str(self.public_id))}"


class DiskEvent(models.Model):
    """An append-only row per disk transition (old → new) or notice (old = new): the disk's timeline."""

    disk = models.ForeignKey(CloudDisk, on_delete=models.CASCADE, related_name="events")
    old = models.CharField(_("from"), max_length=16, choices=DiskStatus.choices, blank=True)
    new = models.CharField(_("to"), max_length=16, choices=DiskStatus.choices)
    reason = models.CharField(_("reason"), max_length=32, choices=DiskReason.choices)
    detail = models.CharField(_("detail"), max_length=255, blank=True)
    data = models.JSONField(default=dict, blank=True)
    at = models.DateTimeField(_("at"), db_index=True)

    class Meta:
        verbose_name = _("disk event")
        verbose_name_plural = _("disk events")
        ordering = ["at", "id"]

    def __str__(self):
        return f"{self.disk_id}: {self.old or '·'} → {self.new} ({self.reason})"


class HubMount(models.Model):
    """A hub model or data set mounted read-only into an instance at ``target`` (``HubItem.mount_path``).

    A mount is metadata handed to the instance's backend, never a copy: the row exists while the item is
    mounted; unmounting deletes it. The item is named by ``repo`` (no key into the hub, which sits above storage
    in the layers), so the row keeps its name if the item is later deleted.
    """

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    instance = models.ForeignKey("instances.Instance", on_delete=models.CASCADE, related_name="hub_mounts")
    repo = models.CharField(_("repository"), max_length=201)
    kind = models.CharField(_("kind"), max_length=8)
    target = models.CharField(_("mounted at"), max_length=300)
    created_at = models.DateTimeField(_("mounted"), auto_now_add=True)

    objects = HubMountQuerySet.as_manager()

    class Meta:
        verbose_name = _("hub mount")
        verbose_name_plural = _("hub mounts")
        ordering = ["created_at", "id"]
        constraints = [models.UniqueConstraint(fields=["instance", "target"], name="hubmount_one_per_target")]

    def __str__(self):
        return f"{self.repo} → {self.target}"

    @property
    def hub_url(self) -> str:
        org, _sep, name = self.repo.partition("/")
        return reverse("marketplace:hub-item", args=[org, name])
