"""Back office for the hub. Saving an item goes through the hub service, so the card, the search index and the
file list stay consistent with what staff typed; counters are read-only (they are caches of likes and mounts)."""

from django import forms
from django.contrib import admin, messages
from django.utils.translation import gettext_lazy as _

from console.errors import ServiceError

from .hub import services
from .models import HubFile, HubItem, HubLike


class HubFileInline(admin.TabularInline):
    model = HubFile
    extra = 0
    fields = ["path", "size_bytes"]


class HubItemForm(forms.ModelForm):
    class Meta:
        model = HubItem
        fields = [
            "repo", "kind", "visibility", "owner", "summary", "summary_zh", "card", "task", "licence", "library_name",
            "languages", "frameworks", "chips", "tags", "parameters_b", "size_bytes", "rows",
        ]  # fmt: skip

    def clean(self):
        data = super().clean()
        values = {name: data.get(name) for name in services.ITEM_FIELDS if name in data}
        try:
            services.validate({"repo": data.get("repo") or self.instance.repo} | values)
            services.cards.split(data.get("card") or "")
        except ServiceError as exc:
            raise forms.ValidationError(exc.message) from exc
        return data


@admin.register(HubItem)
class HubItemAdmin(admin.ModelAdmin):
    form = HubItemForm
    list_display = ["repo", "kind", "task", "licence", "visibility", "owner", "mount_count", "likes_count"]
    list_filter = ["kind", "visibility", ("owner", admin.EmptyFieldListFilter)]
    search_fields = ["repo"]
    list_select_related = ["owner"]
    raw_id_fields = ["owner"]
    readonly_fields = ["public_id", "mount_count", "likes_count", "created_at", "updated_at"]
    inlines = [HubFileInline]
    fieldsets = (
        (None, {"fields": ("repo", "kind", "visibility", "owner", "public_id")}),
        (_("Description"), {"fields": ("summary", "summary_zh", "card")}),
        (
            _("Filters"),
            {
                "fields": ("task", "licence", "library_name", "languages", "frameworks", "chips", "tags"),
                "description": _("Empty fields are filled from the card's front matter when you save."),
            },
        ),
        (_("Size"), {"fields": ("parameters_b", "size_bytes", "rows")}),
        (_("Counters"), {"fields": ("mount_count", "likes_count", "created_at", "updated_at")}),
    )

    def get_readonly_fields(self, request, obj=None):
        # The repository name and owner identify the item for the service; they are fixed once it exists.
        return [*self.readonly_fields, "repo", "owner"] if obj else self.readonly_fields

    def save_model(self, request, obj, form, change):
        fields = {name: form.cleaned_data[name] for name in services.ITEM_FIELDS if name in form.cleaned_data}
        try:
            saved = services.save_item(repo=obj.repo, owner=obj.owner, **fields)
        except ServiceError as exc:
            # The form already validated field formats; this is a rule of the service (e.g. a taken name).
            self.message_user(request, str(exc.message), level=messages.ERROR)
            return
        obj.pk, obj.public_id = saved.pk, saved.public_id
        obj.refresh_from_db()

    def delete_model(self, request, obj):
        item_id = obj.pk
        obj.delete()
        services.search.sync([item_id])


@admin.register(HubLike)
class HubLikeAdmin(admin.ModelAdmin):
    list_display = ["item", "user", "created_at"]
    search_fields = ["item__repo", "user__email"]
    list_select_related = ["item", "user"]
    raw_id_fields = ["item", "user"]

    def has_add_permission(self, request):
        return False  # likes are the users' own; the counter follows them through the service
