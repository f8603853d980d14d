from django.contrib import admin

from .models import Job, JobEvent


class JobEventInline(admin.TabularInline):
    model = JobEvent
    extra = 0
    can_delete = False
    readonly_fields = ["old", "new", "detail", "at"]


@admin.register(Job)
class JobAdmin(admin.ModelAdmin):
    list_display = ["name", "public_id", "owner", "backend", "family", "state", "exit_code", "created_at"]
    list_filter = ["state", "backend", "family"]
    search_fields = ["name", "public_id", "owner__email"]
    list_select_related = ["owner"]
    raw_id_fields = ["owner", "submitted_by", "instance", "chip"]
    readonly_fields = ["public_id", "state", "state_detail", "exit_code", "attempts", "choice", "instance"]
    inlines = [JobEventInline]
