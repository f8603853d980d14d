from django.contrib import admin

from .models import Job, JobEvent, JobSchedule, ScheduleRun


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


class ScheduleRunInline(admin.TabularInline):
    model = ScheduleRun
    extra = 0
    can_delete = False
    readonly_fields = ["due_at", "outcome", "job", "detail", "at"]


@admin.register(JobSchedule)
class JobScheduleAdmin(admin.ModelAdmin):
    list_display = ["name", "public_id", "owner", "cron", "timezone", "suspended", "next_run_at"]
    list_filter = ["suspended", "timezone"]
    search_fields = ["name", "public_id", "owner__email"]
    list_select_related = ["owner"]
    raw_id_fields = ["owner", "created_by"]
    readonly_fields = ["public_id", "next_run_at"]
    inlines = [ScheduleRunInline]
