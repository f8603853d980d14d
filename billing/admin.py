from django.contrib import admin
from django.utils import timezone

from accounts.ops.admin_audit import audited_delete, audited_save

from .models import (
    Account,
    LedgerEntry,
    LedgerTransaction,
    Notification,
    Plan,
    Price,
    PriceBookVersion,
    StoragePrice,
    SubsidyProgramme,
    SubsidyUsage,
    TopUp,
    TrialGrant,
    UsageSession,
    Wallet,
)


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

    def save_model(self, request, obj, form, change):
        audited_save(request, obj, change, lambda: super(PriceAdmin, self).save_model(request, obj, form, change))

    def delete_model(self, request, obj):
        audited_delete(request, obj, lambda: super(PriceAdmin, self).delete_model(request, obj))


@admin.register(StoragePrice)
class StoragePriceAdmin(admin.ModelAdmin):
    """Per-GB-day prices of cloud disks and of cloud storage beyond the free tier; change one by adding a row."""

    list_display = ["resource", "per_gb_day", "effective_from", "note", "created_at"]
    list_filter = ["resource"]


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

    def save_model(self, request, obj, form, change):
        audited_save(
            request, obj, change, lambda: super(SubsidyProgrammeAdmin, self).save_model(request, obj, form, change)
        )


@admin.register(SubsidyUsage)
class SubsidyUsageAdmin(admin.ModelAdmin):
    list_display = ["programme", "user", "month", "amount"]
    list_filter = ["programme", "month"]
    search_fields = ["user__email"]
    list_select_related = ["programme", "user"]
    readonly_fields = ["programme", "user", "month", "amount"]

    def has_add_permission(self, request):
        return False  # booked by the ledger


# --- The ledger (read-only: money moves only through billing.ledger) -------------------------------------------------


class ReadOnlyAdmin(admin.ModelAdmin):
    """Rows written by the billing services only; the back office reads them."""

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(PriceBookVersion)
class PriceBookVersionAdmin(ReadOnlyAdmin):
    """When the prices, plans, programmes or offers last changed (``billing.price_version`` keeps it)."""

    list_display = ["token", "changed_at"]


@admin.register(Account)
class AccountAdmin(ReadOnlyAdmin):
    list_display = ["pk", "kind", "user", "programme", "balance", "expires_at"]
    list_filter = ["kind"]
    search_fields = ["user__email"]
    list_select_related = ["user", "programme"]


class LedgerEntryInline(admin.TabularInline):
    model = LedgerEntry
    extra = 0
    can_delete = False
    fields = ["account", "amount"]
    readonly_fields = fields

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(LedgerTransaction)
class LedgerTransactionAdmin(ReadOnlyAdmin):
    list_display = ["created_at", "kind", "user", "user_amount", "subsidy_amount", "reference", "idempotency_key"]
    list_filter = ["kind"]
    search_fields = ["user__email", "idempotency_key", "provider_reference", "reference"]
    list_select_related = ["user"]
    date_hierarchy = "created_at"
    inlines = [LedgerEntryInline]


@admin.register(LedgerEntry)
class LedgerEntryAdmin(ReadOnlyAdmin):
    list_display = ["pk", "transaction", "account", "amount", "created_at"]
    list_select_related = ["transaction", "account", "account__user"]
    search_fields = ["account__user__email", "transaction__idempotency_key"]


@admin.register(UsageSession)
class UsageSessionAdmin(ReadOnlyAdmin):
    list_display = ["label", "kind", "user", "started_at", "ended_at", "payable_per_hour", "charged_minutes", "charged"]
    list_filter = ["kind", "prepaid"]
    search_fields = ["user__email", "label", "resource_id"]
    list_select_related = ["user"]


@admin.register(TopUp)
class TopUpAdmin(ReadOnlyAdmin):
    list_display = ["created_at", "user", "amount", "provider", "status", "paid_at", "payment_reference"]
    list_filter = ["provider", "status"]
    search_fields = ["user__email", "checkout_id", "payment_reference"]
    list_select_related = ["user"]


@admin.register(TrialGrant)
class TrialGrantAdmin(ReadOnlyAdmin):
    list_display = ["email", "user", "amount", "granted_at", "expires_at", "expired_at"]
    search_fields = ["email"]


@admin.register(Wallet)
class WalletAdmin(admin.ModelAdmin):
    list_display = ["user", "spending_cap", "low_balance_alerted_at", "arrears_period"]
    search_fields = ["user__email"]
    readonly_fields = ["user", "low_balance_alerted_at", "arrears_alerted_at", "arrears_period"]

    def has_add_permission(self, request):
        return False


@admin.register(Notification)
class NotificationAdmin(ReadOnlyAdmin):
    list_display = ["created_at", "user", "kind", "read_at", "emailed_at"]
    list_filter = ["kind"]
    search_fields = ["user__email"]
