from django.contrib import admin

from .models import Channel, Delivery


@admin.register(Channel)
class ChannelAdmin(admin.ModelAdmin):
    list_display = ("name", "kind", "owner", "enabled", "created_at")
    list_filter = ("kind", "enabled")
    search_fields = ("name", "owner__email")
    raw_id_fields = ("owner",)
    # The secret stays out of the admin: it is shown nowhere once saved.
    exclude = ("secret_encrypted",)


@admin.register(Delivery)
class DeliveryAdmin(admin.ModelAdmin):
    list_display = ("event", "channel", "status", "attempts", "response_code", "created_at", "next_attempt_at")
    list_filter = ("status", "event")
    raw_id_fields = ("channel", "notification")
    readonly_fields = [f.name for f in Delivery._meta.fields]
