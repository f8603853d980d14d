"""Back office for the hub. Saving an item goes through the hub service, so the card, the search index and the
file list stay consistent with what staff typed; counters are read-only (they are caches of likes and mounts)."""

from django import forms
from django.contrib import admin, messages
from django.utils.translation import gettext_lazy as _

from accounts.ops.audit import client_ip
from core.errors import ServiceError

from .choices import ImageReview
from .hub import services
from .images import services as images
from .models import HubFile, HubItem, HubLike, Image, ImageEvent, ImageImport, ImageRating, ImageVariant


class HubFileInline(admin.TabularInline):
    model = HubFile
    extra = 0
    fields = ["path", "size_bytes"]


class HubItemForm(forms.ModelForm):
    class Meta:
        model = HubItem
        fields = [
            "repo",
            "kind",
            "visibility",
            "owner",
            "summary",
            "summary_zh",
            "card",
            "task",
            "licence",
            "library_name",
            "languages",
            "frameworks",
            "chips",
            "tags",
            "parameters_b",
            "size_bytes",
            "rows",
        ]

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


# The image marketplace ---------------------------------------------------------------------------------


class ImageVariantInline(admin.TabularInline):
    model = ImageVariant
    extra = 0
    fields = ["family", "slug", "os", "stack", "size_bytes"]


class ImageEventInline(admin.TabularInline):
    model = ImageEvent
    extra = 0
    fields = ["at", "old", "new", "reason", "by"]
    readonly_fields = fields
    can_delete = False

    def has_add_permission(self, request, obj=None):
        return False  # events are written by the services only


@admin.register(Image)
class ImageAdmin(admin.ModelAdmin):
    """Images: staff edit descriptions and list or reject community images (rejecting needs a reason, so it is
    done on the review page or in /ops/, which call the same ``review_image`` service)."""

    list_display = ["slug", "name", "category", "owner", "review_state", "status", "usage_count", "rating_average"]
    list_filter = ["category", "review_state", "status", ("owner", admin.EmptyFieldListFilter)]
    search_fields = ["slug", "name", "name_zh", "owner__email"]
    list_select_related = ["owner"]
    raw_id_fields = ["owner", "cloned_from", "reviewed_by"]
    readonly_fields = [
        "public_id",
        "review_state",
        "review_reason",
        "reviewed_at",
        "reviewed_by",
        "published_at",
        "status",
        "status_detail",
        "usage_count",
        "rating_count",
        "rating_average",
        "source_instance",
        "created_at",
        "updated_at",
    ]
    inlines = [ImageVariantInline, ImageEventInline]
    actions = ["approve_selected"]

    def get_readonly_fields(self, request, obj=None):
        # The owner and slug identify the image (and its variants' slugs); they are fixed once it exists.
        return [*self.readonly_fields, "slug", "owner"] if obj else self.readonly_fields

    def save_model(self, request, obj, form, change):
        images.save_edits(obj)

    def save_related(self, request, form, formsets, change):
        super().save_related(request, form, formsets, change)
        images.reindex(form.instance)

    @admin.action(description=_("List the selected images (approve their review)"))
    def approve_selected(self, request, queryset):
        done = 0
        for image in queryset.filter(review_state=ImageReview.PENDING):
            try:
                images.review_image(image, True, "", request.user, ip=client_ip(request))
            except ServiceError as exc:
                self.message_user(request, f"{image.slug}: {exc.message}", level=messages.ERROR)
                continue
            done += 1
        self.message_user(request, _("%(count)d images listed.") % {"count": done})


@admin.register(ImageRating)
class ImageRatingAdmin(admin.ModelAdmin):
    list_display = ["image", "user", "stars", "updated_at"]
    search_fields = ["image__slug", "user__email"]
    list_select_related = ["image", "user"]
    raw_id_fields = ["image", "user"]

    def has_add_permission(self, request):
        return False  # ratings are the users' own; the image's average follows them through the service


@admin.register(ImageEvent)
class ImageEventAdmin(admin.ModelAdmin):
    list_display = ["image", "old", "new", "reason", "by", "at"]
    list_select_related = ["image", "by"]
    search_fields = ["image__slug"]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(ImageVariant)
class ImageVariantAdmin(admin.ModelAdmin):
    list_display = ["slug", "image", "family", "os", "size_bytes"]
    list_filter = ["family"]
    search_fields = ["slug", "image__slug"]
    list_select_related = ["image"]
    raw_id_fields = ["image"]


@admin.register(ImageImport)
class ImageImportAdmin(admin.ModelAdmin):
    """Read-only: imports are written by the import service; the registry password is never shown."""

    list_display = ["reference", "image", "step", "digest", "created_at", "finished_at"]
    list_filter = ["step"]
    search_fields = ["reference", "image__slug"]
    list_select_related = ["image"]
    exclude = ["password_encrypted"]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False


# Inference templates -------------------------------------------------------------------------------
