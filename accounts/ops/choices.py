"""Choices of the back office: what staff did (the audit log's actions)."""

from django.db import models
from django.utils.translation import gettext_lazy as _


class AuditAction(models.TextChoices):
    """Every kind of staff action the audit log records."""

    NODE_DRAINED = "node_drained", _("Node drained")
    NODE_RETURNED = "node_returned", _("Node returned to service")
    BALANCE_ADJUSTED = "balance_adjusted", _("Balance adjusted")
    INSTANCE_FORCE_STOPPED = "instance_force_stopped", _("Instance force-stopped")
    PRICE_ADDED = "price_added", _("Price added")
    PRICE_CHANGED = "price_changed", _("Future price changed")
    PRICE_DELETED = "price_deleted", _("Future price deleted")
    PROGRAMME_CREATED = "programme_created", _("Subsidy programme created")
    PROGRAMME_CHANGED = "programme_changed", _("Subsidy programme changed")
    PROGRAMME_PAUSED = "programme_paused", _("Subsidy programme paused")
    PROGRAMME_RESUMED = "programme_resumed", _("Subsidy programme resumed")
    PROGRAMME_BUDGET_CHANGED = "programme_budget_changed", _("Subsidy budget changed")
    VERIFICATION_APPROVED = "verification_approved", _("Enterprise verification approved")
    VERIFICATION_REJECTED = "verification_rejected", _("Enterprise verification rejected")
    IMAGE_APPROVED = "image_approved", _("Community image approved")
    IMAGE_REJECTED = "image_rejected", _("Community image rejected")
    ROLES_CHANGED = "roles_changed", _("Staff roles changed")
    INVOICE_ISSUED = "invoice_issued", _("Invoice issued")
    INVOICE_REJECTED = "invoice_rejected", _("Invoice request rejected")
    INVOICE_REVERSED = "invoice_reversed", _("Invoice reversed (红冲)")
    VOUCHER_BATCH_CREATED = "voucher_batch_created", _("Voucher batch created")
    VOUCHER_CODES_EXPORTED = "voucher_codes_exported", _("Voucher codes exported")
    HUB_REPO_TAKEN_DOWN = "hub_repo_taken_down", _("Hub repository taken down")
    HUB_REPO_RESTORED = "hub_repo_restored", _("Hub repository restored")
    ACCOUNT_LIMIT_SET = "account_limit_set", _("Account limit set")


BADGE_COLOURS = {
    AuditAction.BALANCE_ADJUSTED: "warning",
    AuditAction.INSTANCE_FORCE_STOPPED: "danger",
    AuditAction.NODE_DRAINED: "secondary",
    AuditAction.VERIFICATION_REJECTED: "danger",
    AuditAction.IMAGE_REJECTED: "danger",
    AuditAction.INVOICE_REJECTED: "danger",
    AuditAction.HUB_REPO_TAKEN_DOWN: "danger",
    AuditAction.INVOICE_ISSUED: "success",
    AuditAction.VERIFICATION_APPROVED: "success",
    AuditAction.IMAGE_APPROVED: "success",
}
