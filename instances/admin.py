from django.contrib import admin, messages
from django.utils.translation import gettext_lazy as _

from accounts.ops.admin_audit import audited_save
from accounts.ops.audit import Actor
from backoffice import services as ops_services
from catalog.models import Chip, InstanceSpec, Node, Region, ScalingFigure, Zone
from core.errors import ServiceError

from . import lifecycle
from .models import (
    AccountLimit,
    AgentReport,
    DailyPowerSchedule,
    HostLoad,
    Instance,
    InstanceEvent,
    Secret,
    SimulatedFault,
    SimulatedJob,
    WaitingLaunch,
)


@admin.register(Region)
class RegionAdmin(admin.ModelAdmin):
    list_display = ["slug", "name", "name_zh", "sort_order"]
    search_fields = ["slug", "name", "name_zh"]


@admin.register(Zone)
class ZoneAdmin(admin.ModelAdmin):
    list_display = ["slug", "name", "name_zh", "region", "xinchuang", "egress", "active"]
    list_filter = ["region", "xinchuang", "egress", "active"]
    search_fields = ["slug", "name", "name_zh"]
    list_select_related = ["region"]


class ScalingFigureInline(admin.TabularInline):
    model = ScalingFigure
    extra = 0


@admin.register(Chip)
class ChipAdmin(admin.ModelAdmin):
    list_display = ["slug", "name", "vendor", "backend", "xinchuang", "rentable", "memory_gb", "tflops_bf16", "mfu"]
    list_filter = ["backend", "xinchuang", "rentable", "vendor"]
    search_fields = ["slug", "name", "name_zh", "vendor"]
    inlines = [ScalingFigureInline]


@admin.register(Node)
class NodeAdmin(admin.ModelAdmin):
    list_display = ["name", "zone", "chip", "cards", "cards_reserved", "vcpus", "memory_gb", "backend_name", "drained"]
    # Draining is a staff action with an audit row: the actions below (and /ops/capacity/) go through the service.
    readonly_fields = ["cards_reserved", "cpu_millis_reserved", "memory_mb_reserved", "drained"]
    list_filter = ["zone", "chip", "backend_name", "drained"]
    search_fields = ["name"]
    list_select_related = ["zone", "chip"]
    actions = ["drain", "return_to_service"]

    def _set_drained(self, request, queryset, drained):
        for node in queryset.select_related("zone").filter(drained=not drained):
            try:
                ops_services.set_drained(
                    Actor.from_request(request),
                    zone_slug=node.zone.slug,
                    name=node.name,
                    drained=drained,
                    reason="admin",
                )
            except ServiceError as exc:
                self.message_user(request, f"{node.name}: {exc.message}", messages.WARNING)

    @admin.action(description=_("Drain (no new instances; audited)"))
    def drain(self, request, queryset):
        self._set_drained(request, queryset, True)

    @admin.action(description=_("Return to service (audited)"))
    def return_to_service(self, request, queryset):
        self._set_drained(request, queryset, False)


@admin.register(InstanceSpec)
class InstanceSpecAdmin(admin.ModelAdmin):
    list_display = ["slug", "chip", "cards", "vcpus", "memory_gb", "system_disk_gb", "active"]
    list_filter = ["chip", "cards", "active"]
    search_fields = ["slug"]
    list_select_related = ["chip"]


class InstanceEventInline(admin.TabularInline):
    model = InstanceEvent
    extra = 0
    can_delete = False
    readonly_fields = ["at", "old", "new", "reason", "detail", "data"]

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(Instance)
class InstanceAdmin(admin.ModelAdmin):
    """Instances are changed only through the state machine: the admin reads, and force-stops or releases."""

    list_display = ["name", "public_id", "owner", "status", "wanted", "chip", "cards", "zone", "node", "plan", "spot"]
    list_filter = ["status", "zone", "chip", "spot", "plan"]
    search_fields = ["name", "public_id", "owner__email", "backend_job_id"]
    list_select_related = ["owner", "chip", "zone", "node", "plan"]
    inlines = [InstanceEventInline]
    actions = ["force_stop", "force_release"]

    def get_readonly_fields(self, request, obj=None):
        return [f.name for f in self.model._meta.fields]

    def has_add_permission(self, request):
        return False

    def _each(self, request, queryset, operation):
        for instance in queryset.select_related("owner", "chip", "zone", "node", "plan", "spec"):
            try:
                operation(instance)
            except ServiceError as exc:
                self.message_user(request, f"{instance.name}: {exc.message}", messages.WARNING)

    @admin.action(description=_("Force-stop (checkpoint signal, then stop; audited)"))
    def force_stop(self, request, queryset):
        actor = Actor.from_request(request)
        self._each(
            request,
            queryset,
            lambda instance: ops_services.force_stop(
                actor, instance_id=instance.public_id, reason=str(_("Force-stopped from the admin"))
            ),
        )

    @admin.action(description=_("Release (deletes the system disk)"))
    def force_release(self, request, queryset):
        self._each(request, queryset, lifecycle.release)


@admin.register(InstanceEvent)
class InstanceEventAdmin(admin.ModelAdmin):
    list_display = ["at", "instance", "old", "new", "reason", "detail"]
    list_filter = ["reason", "new"]
    search_fields = ["instance__name", "instance__public_id"]
    list_select_related = ["instance"]

    def has_change_permission(self, request, obj=None):
        return False  # append-only

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(WaitingLaunch)
class WaitingLaunchAdmin(admin.ModelAdmin):
    list_display = ["queued_at", "name", "owner", "chip", "family", "cards", "state", "detail"]
    list_filter = ["state", "family"]
    search_fields = ["name", "public_id", "owner__username"]
    list_select_related = ["owner", "chip"]
    readonly_fields = ["state", "instance", "queued_at", "ended_at"]


@admin.register(SimulatedJob)
class SimulatedJobAdmin(admin.ModelAdmin):
    list_display = ["job_id", "instance_id", "node", "cards", "submitted_at", "ready_at", "stop_at", "crashed_at"]
    list_select_related = ["node"]
    search_fields = ["job_id", "instance_id"]


@admin.register(SimulatedFault)
class SimulatedFaultAdmin(admin.ModelAdmin):
    list_display = ["kind", "remaining", "created_at"]


@admin.register(AgentReport)
class AgentReportAdmin(admin.ModelAdmin):
    list_display = ["at", "instance", "job_id", "event", "source", "card_utilisation", "memory_used"]
    list_filter = ["event", "source"]
    search_fields = ["instance__name", "instance__public_id", "job_id"]
    list_select_related = ["instance"]

    def has_change_permission(self, request, obj=None):
        return False  # what an agent said is not edited


@admin.register(Secret)
class SecretAdmin(admin.ModelAdmin):
    """Users' secrets, by name: staff see who keeps which and when it changed, never a value (not even encrypted),
    and cannot write one. Deleting is allowed, as the owner could."""

    list_display = ["name", "owner", "created_at", "updated_at"]
    search_fields = ["name", "owner__email"]
    list_select_related = ["owner"]
    fields = ["name", "owner", "value", "created_at", "updated_at"]
    readonly_fields = fields

    @admin.display(description=_("value"))
    def value(self, secret) -> str:
        return "••••••••"

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(AccountLimit)
class AccountLimitAdmin(admin.ModelAdmin):
    """The operator's limits on machines at once: the row without an account is everyone's default (empty figures:
    the settings'), an account's row raises or lowers it for that account. Every save is audited."""

    list_display = ["__str__", "max_machines", "max_cpu_only", "updated_at"]
    search_fields = ["account__email"]
    raw_id_fields = ["account"]

    def has_delete_permission(self, request, obj=None):
        return False  # clear the figures instead: the change stays in the audit log

    def save_model(self, request, obj, form, change):
        audited_save(
            request, obj, change, lambda: super(AccountLimitAdmin, self).save_model(request, obj, form, change)
        )


@admin.register(HostLoad)
class HostLoadAdmin(admin.ModelAdmin):
    """What the machines hold on a backend's one host (the local backend): changed only by the reservations."""

    list_display = ["backend_name", "cpu_millis_reserved", "memory_mb_reserved"]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(DailyPowerSchedule)
class DailyPowerScheduleAdmin(admin.ModelAdmin):
    list_display = ["instance", "stop_at", "start_at", "timezone", "done_until"]
    list_select_related = ["instance"]
    raw_id_fields = ["instance"]
    readonly_fields = ["done_until"]
