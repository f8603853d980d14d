from django.contrib import admin
from django.template.defaultfilters import filesizeformat

from .models import Entry, Upload


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
