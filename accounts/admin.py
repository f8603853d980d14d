from django.contrib import admin, messages
from django.contrib.auth.admin import UserAdmin as BaseUserAdmin
from django.utils.translation import gettext_lazy as _

from backoffice import services as ops_services
from core.errors import ServiceError

from .models import (
    ApiToken,
    AuditEntry,
    CapacitySnapshot,
    EnterpriseVerification,
    RealNameVerification,
    SSHKey,
    StudentVerification,
    User,
    WorkerHeartbeat,
)
from .ops.audit import Actor


@admin.register(User)
class UserAdmin(BaseUserAdmin):
    ordering = ["-date_joined"]
    list_display = ["email", "first_name", "last_name", "is_staff", "is_active", "date_joined", "last_login"]
    list_filter = ["is_staff", "is_superuser", "is_active", "groups"]
    search_fields = ["email", "first_name", "last_name"]
    readonly_fields = ["public_id", "date_joined", "last_login"]
    fieldsets = (
        (None, {"fields": ("email", "password", "public_id")}),
        (_("Personal info"), {"fields": ("first_name", "last_name")}),
        (
            _("Permissions"),
            {"fields": ("is_active", "is_staff", "is_superuser", "groups", "user_permissions")},
        ),
        (_("Important dates"), {"fields": ("last_login", "date_joined")}),
    )
    add_fieldsets = ((None, {"classes": ("wide",), "fields": ("email", "password1", "password2")}),)


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ["name", "user", "prefix", "scope", "created_at", "last_used_at", "revoked_at"]
    list_filter = ["scope", ("revoked_at", admin.EmptyFieldListFilter)]
    search_fields = ["name", "prefix", "user__email"]
    list_select_related = ["user"]
    readonly_fields = ["public_id", "user", "prefix", "created_at", "last_used_at"]
    exclude = ["token_hash"]

    def has_add_permission(self, request):
        return False  # tokens are issued by their owner, who alone sees the secret


@admin.register(SSHKey)
class SSHKeyAdmin(admin.ModelAdmin):
    list_display = ["name", "user", "key_type", "fingerprint", "created_at", "last_used_at"]
    list_filter = ["key_type"]
    search_fields = ["name", "fingerprint", "user__email"]
    list_select_related = ["user"]
    readonly_fields = ["public_id", "user", "key_type", "fingerprint", "public_key", "created_at", "last_used_at"]

    def has_add_permission(self, request):
        return False  # keys are added by their owner, through the checks of accounts.ssh_keys


@admin.register(WorkerHeartbeat)
class WorkerHeartbeatAdmin(admin.ModelAdmin):
    list_display = ["hostname", "beat_at", "beats"]
    readonly_fields = ["hostname", "beat_at", "beats"]


class ReadOnlyAdmin(admin.ModelAdmin):
    """Rows written by services only; the back office reads them."""

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(RealNameVerification)
class RealNameVerificationAdmin(ReadOnlyAdmin):
    """Masked: the name's first character and the number's last four; the whole number is never stored."""

    list_display = ["user", "masked_name", "masked_number", "provider", "verified_at"]
    fields = readonly_fields = ["user", "masked_name", "masked_number", "document", "provider", "verified_at"]
    search_fields = ["user__email"]
    list_select_related = ["user"]


@admin.register(StudentVerification)
class StudentVerificationAdmin(ReadOnlyAdmin):
    """A student's university address and how long the student prices apply; the code is never stored."""

    list_display = ["user", "email", "verified_at", "expires_at"]
    fields = readonly_fields = ["user", "email", "code_sent_at", "attempts", "verified_at", "expires_at"]
    search_fields = ["user__email", "email"]
    list_select_related = ["user"]


@admin.register(EnterpriseVerification)
class EnterpriseVerificationAdmin(ReadOnlyAdmin):
    """Reviewed in the back office's queue (/ops/reviews/), where a rejection gets its reason; approving here goes
    through the same audited service."""

    list_display = ["company_name", "licence_number", "user", "status", "submitted_at", "reviewed_by", "reviewed_at"]
    list_filter = ["status"]
    search_fields = ["company_name", "licence_number", "user__email", "contact_name", "contact_phone"]
    list_select_related = ["user", "reviewed_by"]
    date_hierarchy = "submitted_at"
    actions = ["approve"]

    @admin.action(description=_("Approve the selected applications (audited)"), permissions=["review"])
    def approve(self, request, queryset):
        for application in queryset.filter(status=EnterpriseVerification.Status.PENDING):
            try:
                ops_services.review_verification(
                    Actor.from_request(request), public_id=application.public_id, approve=True
                )
            except ServiceError as exc:
                self.message_user(request, f"{application.company_name}: {exc.message}", messages.WARNING)

    def has_review_permission(self, request):
        return request.user.has_perm("console.review_enterprise")


@admin.register(AuditEntry)
class AuditEntryAdmin(ReadOnlyAdmin):
    """The audit log: searchable, never added to, changed or deleted here (the model refuses it too)."""

    list_display = ["at", "actor_email", "action", "target_type", "target_label", "reason", "ip"]
    list_filter = ["action", "target_type"]
    search_fields = ["actor_email", "target_id", "target_label", "reason"]
    date_hierarchy = "at"
    readonly_fields = [f.name for f in AuditEntry._meta.fields]


@admin.register(CapacitySnapshot)
class CapacitySnapshotAdmin(ReadOnlyAdmin):
    list_display = ["at", "zone", "chip", "cards_total", "cards_used", "cards_drained", "running_instances"]
    list_filter = ["zone", "chip"]
    list_select_related = ["zone", "chip"]
    date_hierarchy = "at"
