from django.contrib import admin

from .models import Endpoint, EndpointKey, EndpointRequest, InferenceTemplate


@admin.register(InferenceTemplate)
class InferenceTemplateAdmin(admin.ModelAdmin):
    list_display = ["slug", "model", "framework", "variant", "cards", "active", "sort_order"]
    list_filter = ["framework", "active", "variant__family"]
    search_fields = ["slug", "model__repo"]
    list_select_related = ["model", "variant"]
    raw_id_fields = ["model"]


@admin.register(Endpoint)
class EndpointAdmin(admin.ModelAdmin):
    list_display = ["served_model", "instance", "template", "idle_stop_minutes", "last_request_at", "created_at"]
    search_fields = ["served_model", "instance__name", "public_id", "instance__owner__email"]
    list_select_related = ["instance", "template"]
    raw_id_fields = ["instance"]
    readonly_fields = ["public_id", "last_request_at"]


@admin.register(EndpointKey)
class EndpointKeyAdmin(admin.ModelAdmin):
    list_display = ["name", "prefix", "endpoint", "created_at", "last_used_at", "revoked_at"]
    search_fields = ["prefix", "name"]
    list_select_related = ["endpoint"]
    readonly_fields = ["public_id", "prefix", "endpoint", "created_at", "last_used_at"]


@admin.register(EndpointRequest)
class EndpointRequestAdmin(admin.ModelAdmin):
    list_display = ["at", "endpoint", "path", "status_code", "latency_ms", "prompt_tokens", "completion_tokens"]
    list_filter = ["status_code", "stream"]
    list_select_related = ["endpoint"]

    def has_change_permission(self, request, obj=None):
        return False  # the request log is append-only
