from django.urls import reverse
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from ..models import Entry


class EntrySerializer(serializers.ModelSerializer):
    id = serializers.UUIDField(source="public_id", read_only=True)
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


class FolderCreateSerializer(serializers.Serializer):
    path = serializers.CharField(
        max_length=4096,
        allow_blank=True,
        trim_whitespace=False,
        help_text="Folder to create, e.g. /datasets/raw (parents are created).",
    )


class EntryChangeSerializer(serializers.Serializer):
    name = serializers.CharField(
        required=False, allow_blank=True, trim_whitespace=False, max_length=1024, help_text="New name."
    )
    folder = serializers.CharField(
        required=False,
        allow_blank=True,
        trim_whitespace=False,
        max_length=4096,
        help_text="Folder to move into, e.g. / or /archive.",
    )


class UsageSerializer(serializers.Serializer):
    used = serializers.IntegerField(help_text="Bytes stored in files.")
    reserved = serializers.IntegerField(help_text="Bytes held for uploads in progress.")
    free = serializers.IntegerField(help_text="Bytes free of charge; beyond them storage is billed per GB-day.")
    maximum = serializers.IntegerField(help_text="The most this account can store.")
    billable = serializers.IntegerField()
    available = serializers.IntegerField()
