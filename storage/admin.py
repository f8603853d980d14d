from django.contrib import admin
from django.template.defaultfilters import filesizeformat

from .models import CloudDisk, DiskEvent, Entry, HubMount, Upload


@admin.register(Entry)
class EntryAdmin(admin.ModelAdmin):
    list_display = ["path", "owner", "kind", "human_size", "updated_at"]
    list_filter = ["kind"]
    search_fields = ["path", "owner__email", "public_id"]
    list_select_related = ["owner"]
    raw_id_fields = ["owner", "parent"]
    readonly_fields = ["public_id", "storage_key", "checksum", "created_at", "updated_at"]

    @admin.display(description="size", ordering="size")
    def human_size(self, entry):
        return "" if entry.is_folder else filesizeformat(entry.size)

    def has_add_permission(self, request):
        # Files come from uploads; folders from the user. An admin-made row would have no bytes behind it.
        return False


@admin.register(Upload)
class UploadAdmin(admin.ModelAdmin):
    list_display = ["filename", "owner", "status", "offset", "length", "updated_at"]
    list_filter = ["status"]
    search_fields = ["filename", "owner__email", "public_id"]
    list_select_related = ["owner"]
    raw_id_fields = ["owner", "folder", "entry"]
    readonly_fields = [f.name for f in Upload._meta.fields]

    def has_add_permission(self, request):
        return False


class DiskEventInline(admin.TabularInline):
    model = DiskEvent
    extra = 0
    can_delete = False
    readonly_fields = ["at", "old", "new", "reason", "detail", "data"]

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(CloudDisk)
class CloudDiskAdmin(admin.ModelAdmin):
    """Disks change through ``storage.disks`` (metering, the backend): the admin shows them, it does not edit."""

    list_display = ["name", "owner", "size_gb", "zone", "status", "instance", "arrears_since", "created_at"]
    list_filter = ["status", "zone"]
    search_fields = ["name", "owner__email", "public_id"]
    list_select_related = ["owner", "zone", "instance"]
    readonly_fields = [f.name for f in CloudDisk._meta.fields]
    inlines = [DiskEventInline]

    def has_add_permission(self, request):
        return False


@admin.register(HubMount)
class HubMountAdmin(admin.ModelAdmin):
    list_display = ["repo", "target", "instance", "created_at"]
    search_fields = ["repo", "instance__name", "instance__public_id"]
    list_select_related = ["instance"]
    readonly_fields = [f.name for f in HubMount._meta.fields]

    def has_add_permission(self, request):
        return False
