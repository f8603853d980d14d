from django.urls import reverse
from django.utils.translation import gettext_lazy
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from billing.quote import quote_disk, storage_price
from core.api import strict
from core.api.schema import named_format
from core.api.validators import AtLeast, AtMost, RequiredText, display_name

from .. import paths
from ..disks import MAX_GB, MIN_GB, clean_size
from ..disks import clean_name as clean_disk_name
from ..models import CloudDisk, Entry

SIZE_RANGE = [AtLeast(MIN_GB, refuse=clean_size), AtMost(MAX_GB, refuse=clean_size)]


class EntrySerializer(strict.ModelSerializer):
    """A file or folder. The root folder (``lookup`` of ``/``) has no id and no dates: those are null there."""

    id = serializers.UUIDField(source="public_id", read_only=True, allow_null=True)
    created_at = serializers.DateTimeField(read_only=True, allow_null=True)
    updated_at = serializers.DateTimeField(read_only=True, allow_null=True)
    download_url = serializers.SerializerMethodField()

    class Meta:
        model = Entry
        fields = ["id", "kind", "name", "path", "size", "checksum", "content_type", "created_at", "updated_at"]
        fields += ["download_url"]
        read_only_fields = fields

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_download_url(self, entry) -> str | None:
        if entry.is_folder:
            return None
        return reverse("api-storage-entry-download", kwargs={"public_id": entry.public_id})


ROOT_FOLDER = {
    "id": None,
    "kind": "folder",
    "name": "",
    "path": "/",
    "size": 0,
    "checksum": "",
    "content_type": "",
    "created_at": None,
    "updated_at": None,
    "download_url": None,
}


@named_format(paths.PATH_FORMAT, paths.PATH_RULES)
class PathField(serializers.CharField):
    """A path in the user's storage (``paths.clean_path`` checks it)."""


@named_format(paths.NAME_FORMAT, paths.NAME_RULES)
class NameField(RequiredText):
    """A file or folder name (``paths.clean_name`` checks it): never empty."""

    def __init__(self, **kwargs):
        super().__init__(empty_message=gettext_lazy("The name is empty."), empty_code="invalid_path", **kwargs)


class FolderCreateSerializer(strict.Serializer):
    path = PathField(
        max_length=4096,
        trim_whitespace=False,
        help_text="Folder to create, e.g. /datasets/raw (parents are created).",
    )


class EntryChangeSerializer(strict.Serializer):
    """A rename (``name``), a move (``folder``), or both (neither: nothing changes)."""

    name = NameField(required=False, trim_whitespace=False, max_length=1024, help_text="New name.")
    folder = PathField(
        required=False, trim_whitespace=False, max_length=4096, help_text="Folder to move into, e.g. / or /archive."
    )


class UsageSerializer(strict.Serializer):
    used = serializers.IntegerField(help_text="Bytes stored: files, and what is kept elsewhere (see elsewhere).")
    elsewhere = serializers.IntegerField(help_text="The part of used kept by the hub: published repositories.")
    reserved = serializers.IntegerField(help_text="Bytes held for uploads in progress.")
    free = serializers.IntegerField(help_text="Bytes free of charge; beyond them storage is billed per GB-day.")
    maximum = serializers.IntegerField(help_text="The most this account can store.")
    billable = serializers.IntegerField()
    available = serializers.IntegerField()


# Cloud disks and hub mounts ----------------------------------------------------------------------------------------


class DiskSerializer(strict.ModelSerializer):
    """A cloud disk. ``instance`` is the id of the instance it is attached to (null when detached)."""

    id = serializers.UUIDField(source="public_id", read_only=True)
    zone = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    instance = serializers.UUIDField(source="instance.public_id", read_only=True, allow_null=True, default=None)
    instance_name = serializers.CharField(source="instance.name", read_only=True, allow_null=True, default=None)
    status = serializers.CharField(read_only=True, help_text="available, attaching, attached or detaching.")
    status_display = serializers.CharField(source="get_status_display", read_only=True)
    per_gb_day = serializers.SerializerMethodField()
    per_month = serializers.SerializerMethodField()
    kept_until = serializers.DateTimeField(
        read_only=True, allow_null=True, help_text="While the owner is in arrears: when the disk will be deleted."
    )

    class Meta:
        model = CloudDisk
        fields = ["id", "name", "size_gb", "zone", "status", "status_display", "instance", "instance_name"]
        fields += ["device_path", "per_gb_day", "per_month", "arrears_since", "kept_until", "created_at"]
        read_only_fields = fields

    def _price(self, disk):
        prices = self.context.setdefault("prices", {})
        if disk.size_gb not in prices:
            if "price_row" not in self.context:
                self.context["price_row"] = storage_price("disk")
            prices[disk.size_gb] = quote_disk(disk.size_gb, price=self.context["price_row"])
        return prices[disk.size_gb]

    @extend_schema_field(serializers.DecimalField(max_digits=16, decimal_places=6))
    def get_per_gb_day(self, disk) -> str:
        return str(self._price(disk).per_gb_day)

    @extend_schema_field(serializers.DecimalField(max_digits=14, decimal_places=2))
    def get_per_month(self, disk) -> str:
        return str(self._price(disk).per_month)


class DiskCreateSerializer(strict.Serializer):
    name = serializers.CharField(
        max_length=64,
        validators=[display_name(64, gettext_lazy("disk"), also_refused="/", refuse=clean_disk_name)],
        help_text="1 to 64 characters without “/”, unique among your disks.",
    )
    size_gb = serializers.IntegerField(validators=SIZE_RANGE, help_text="Whole GB, 1 to 32768.")
    zone = serializers.CharField(max_length=50, help_text="A zone slug, e.g. cn-east-xc.")


class DiskGrowSerializer(strict.Serializer):
    size_gb = serializers.IntegerField(
        validators=SIZE_RANGE, help_text="The new size in GB (at most 32768); larger than the current one."
    )


class DiskAttachSerializer(strict.Serializer):
    instance = serializers.CharField(max_length=64, help_text="The id of one of your instances in the disk's zone.")


class MountSerializer(strict.Serializer):
    repo = serializers.CharField(read_only=True)
    kind = serializers.CharField(read_only=True)
    target = serializers.CharField(read_only=True, help_text="Read-only mount point inside the instance.")
    read_only = serializers.BooleanField(read_only=True, default=True)
    created_at = serializers.DateTimeField(read_only=True, allow_null=True)


class MountCreateSerializer(strict.Serializer):
    repo = serializers.CharField(max_length=201, help_text="A hub model or dataset, org/name.")
