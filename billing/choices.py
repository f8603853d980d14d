"""Choices for prices, plans and subsidies."""

from django.db import models
from django.utils.translation import gettext_lazy as _


class Eligibility(models.TextChoices):
    """Who may receive a subsidy programme's discount."""

    EVERYONE = "everyone", _("Everyone")
    VERIFIED_ENTERPRISE = "verified_enterprise", _("Verified enterprises")
    STUDENT = "student", _("Verified students")


class TermUnit(models.TextChoices):
    """Units a visitor can give a term in."""

    MINUTES = "minutes", _("minutes")
    HOURS = "hours", _("hours")
    DAYS = "days", _("days")
    MONTHS = "months", _("months (30 days)")


TERM_UNIT_MINUTES = {TermUnit.MINUTES: 1, TermUnit.HOURS: 60, TermUnit.DAYS: 1440, TermUnit.MONTHS: 43200}


class AccountKind(models.TextChoices):
    """Ledger accounts. Each user has a cash and a trial bucket; the rest are the operator's."""

    USER_CASH = "user_cash", _("Cash balance")
    USER_TRIAL = "user_trial", _("Trial credit")
    REVENUE = "revenue", _("Revenue")
    SUBSIDY = "subsidy", _("Subsidy programme")
    PAYMENT_CLEARING = "payment_clearing", _("Payment clearing")
    ADJUSTMENTS = "adjustments", _("Adjustments")
    AUTHOR_PAYOUTS = "author_payouts", _("Image-author payouts")
    TRIAL_FUNDING = "trial_funding", _("Trial credit funding")
    USER_VOUCHER = "user_voucher", _("Voucher")
    VOUCHER_FUNDING = "voucher_funding", _("Vouchers issued")
    VOUCHER_EXPIRED = "voucher_expired", _("Vouchers expired unused")


# The buckets every user has, created with the wallet; a voucher's account is made when the code is redeemed.
USER_ACCOUNT_KINDS = (AccountKind.USER_CASH, AccountKind.USER_TRIAL)
# Everything a wallet holds: what a transaction's ``user_amount`` sums and the wallet's spend is made of.
WALLET_KINDS = (*USER_ACCOUNT_KINDS, AccountKind.USER_VOUCHER)


class TransactionKind(models.TextChoices):
    """Why money moved."""

    TOPUP = "topup", _("Top-up")
    USAGE = "usage", _("Usage")
    UPFRONT = "upfront", _("Prepaid plan")
    STORAGE = "storage", _("Storage")
    TRIAL_GRANT = "trial_grant", _("Trial credit granted")
    TRIAL_EXPIRY = "trial_expiry", _("Trial credit expired")
    REFUND = "refund", _("Refund")
    DISPUTE = "dispute", _("Payment dispute")
    DISPUTE_WON = "dispute_won", _("Dispute resolved in your favour")
    WITHDRAWAL = "withdrawal", _("Withdrawal")
    ADJUSTMENT = "adjustment", _("Adjustment")
    AUTHOR_PAYOUT = "author_payout", _("Image-author revenue share")
    VOUCHER_GRANT = "voucher_grant", _("Voucher redeemed")
    VOUCHER_EXPIRY = "voucher_expiry", _("Voucher expired")


# What may spend the trial credit: compute only (and its expiry takes what is left). Nothing else may touch it.
TRIAL_DEBIT_KINDS = frozenset({TransactionKind.USAGE, TransactionKind.UPFRONT, TransactionKind.TRIAL_EXPIRY})
# (A usage posting gives back what it took when a run's end is noticed after minutes past it were charged.)
TRIAL_CREDIT_KINDS = frozenset({TransactionKind.TRIAL_GRANT, TransactionKind.USAGE})
# A voucher likewise pays for the compute it covers and nothing else; only its redemption puts money on it (and
# a usage posting giving back what it took).
VOUCHER_DEBIT_KINDS = frozenset({TransactionKind.USAGE, TransactionKind.UPFRONT, TransactionKind.VOUCHER_EXPIRY})
VOUCHER_CREDIT_KINDS = frozenset({TransactionKind.VOUCHER_GRANT, TransactionKind.USAGE})
# Metering charges what has been used even when it takes the cash below zero (the arrears stop follows within
# one metering period); refunds and disputes claw back what was paid. Nothing else may overdraw a wallet.
OVERDRAFT_KINDS = frozenset(
    {
        TransactionKind.USAGE,
        TransactionKind.STORAGE,
        TransactionKind.REFUND,
        TransactionKind.DISPUTE,
        TransactionKind.ADJUSTMENT,
    }
)
SPEND_KINDS = (TransactionKind.USAGE, TransactionKind.UPFRONT, TransactionKind.STORAGE)


class UsageKind(models.TextChoices):
    """What a usage session meters."""

    INSTANCE = "instance", _("Instance")
    ENDPOINT = "endpoint", _("Inference endpoint")
    DISK = "disk", _("Cloud disk")
    STORAGE = "storage", _("Cloud storage")


class StorageResource(models.TextChoices):
    """What a per-GB-day storage price applies to."""

    DISK = "disk", _("Cloud disk")
    STORAGE = "storage", _("Cloud storage beyond the free tier")


# The trial credit pays for compute only.
COMPUTE_KINDS = frozenset({UsageKind.INSTANCE, UsageKind.ENDPOINT})


class TopUpStatus(models.TextChoices):
    PENDING = "pending", _("Waiting for payment")
    PAID = "paid", _("Paid")
    CANCELLED = "cancelled", _("Cancelled")
    EXPIRED = "expired", _("Expired")


class PaymentProvider(models.TextChoices):
    STRIPE = "stripe", _("Stripe")
    SANDBOX = "sandbox", _("Sandbox (simulated, no real money)")


class NotificationKind(models.TextChoices):
    LOW_BALANCE = "low_balance", _("Low balance")
    ARREARS = "arrears", _("Out of balance")
    SPENDING_CAP = "spending_cap", _("Spending cap reached")
    TRIAL_EXPIRED = "trial_expired", _("Trial credit expired")
    DISK_REMINDER = "disk_reminder", _("Disk to be deleted")
    DISK_DELETED = "disk_deleted", _("Disk deleted")
    SPOT_PREEMPTED = "spot_preempted", _("Spot instance reclaimed")
    RELEASE_REMINDER = "release_reminder", _("Instance to be released")
    MEMBER_BUDGET = "member_budget", _("Monthly budget reached")
    VOUCHER_EXPIRED = "voucher_expired", _("Voucher expired")
    JOB_STARTED = "job_started", _("Job started")
    JOB_SUCCEEDED = "job_succeeded", _("Job succeeded")
    JOB_FAILED = "job_failed", _("Job failed")
    JOB_TIMED_OUT = "job_timed_out", _("Job timed out")
    QUEUE_STARTED = "queue_started", _("Instance started from the queue")
    QUEUE_LEFT = "queue_left", _("Instance left the queue")
    SCHEDULE_MISSED = "schedule_missed", _("Scheduled run not started")
