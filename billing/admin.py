from django.contrib import admin
from django.utils import timezone

from .models import Plan, Price, SubsidyProgramme, SubsidyUsage


@admin.register(Price)
class PriceAdmin(admin.ModelAdmin):
    """A price in force is history: change a price by adding a row with a later ``effective_from``."""

    list_display = ["chip", "per_hour", "effective_from", "note", "created_at"]
    list_filter = ["chip"]
    list_select_related = ["chip"]
    date_hierarchy = "effective_from"

    def get_readonly_fields(self, request, obj=None):
        if obj is not None and obj.effective_from <= timezone.now():
            return ["chip", "per_hour", "effective_from", "created_at"]
        return ["created_at"]

    def has_delete_permission(self, request, obj=None):
        return obj is None or obj.effective_from > timezone.now()


@admin.register(Plan)
class PlanAdmin(admin.ModelAdmin):
    list_display = ["slug", "name", "name_zh", "factor", "period_minutes", "spot_factor", "active", "sort_order"]
    list_editable = ["active", "sort_order"]


class SubsidyUsageInline(admin.TabularInline):
    model = SubsidyUsage
    extra = 0
    can_delete = False
    readonly_fields = ["user", "month", "amount"]

    def has_add_permission(self, request, obj=None):
        return False  # booked by the ledger


@admin.register(SubsidyProgramme)
class SubsidyProgrammeAdmin(admin.ModelAdmin):
    list_display = ["slug", "name", "rate", "starts_at", "ends_at", "budget", "spent", "eligibility", "active"]
    list_filter = ["active", "eligibility"]
    search_fields = ["slug", "name", "name_zh"]
    filter_horizontal = ["chips", "zones"]
    readonly_fields = ["spent", "created_at"]


@admin.register(SubsidyUsage)
class SubsidyUsageAdmin(admin.ModelAdmin):
    list_display = ["programme", "user", "month", "amount"]
    list_filter = ["programme", "month"]
    search_fields = ["user__email"]
    list_select_related = ["programme", "user"]
    readonly_fields = ["programme", "user", "month", "amount"]

    def has_add_permission(self, request):
        return False  # booked by the ledger
