"""Back-office forms. They check formats; the services in ``services.py`` check the rules."""

import uuid
from decimal import Decimal

from django import forms
from django.utils.translation import gettext_lazy as _
from django.utils.translation import pgettext_lazy

from accounts.ops.choices import AuditAction
from billing.choices import Eligibility
from billing.forms import AmountField
from billing.models import Plan
from catalog.models import Chip, Zone

DATETIME_LOCAL = forms.DateTimeInput(attrs={"type": "datetime-local"}, format="%Y-%m-%dT%H:%M")


def _reason(required=True, label=None):
    return forms.CharField(
        label=label or _("Reason"),
        required=required,
        max_length=500,
        widget=forms.Textarea(attrs={"rows": 2}),
        error_messages={"required": _("Give a reason: it is kept in the audit log.")},
    )


class AdjustBalanceForm(forms.Form):
    amount = AmountField(
        label=_("Amount (CNY)"),
        max_digits=9,
        decimal_places=2,
        help_text=_("Positive credits the user's cash balance, negative debits it."),
    )
    reason = _reason(label=_("Reason (kept in the audit log and on the transaction)"))
    idempotency_key = forms.UUIDField(widget=forms.HiddenInput, initial=uuid.uuid4)


class ReasonForm(forms.Form):
    reason = _reason()


class NodeForm(forms.Form):
    reason = _reason(required=False)


class PriceForm(forms.Form):
    chip = forms.ChoiceField(label=_("Chip"))
    per_hour = AmountField(label=_("Price per card-hour (CNY)"), max_digits=16, decimal_places=6, min_value=0)
    effective_from = forms.DateTimeField(
        label=_("Effective from"),
        widget=DATETIME_LOCAL,
        help_text=_("New launches from this moment pay the new price; running instances keep their rate."),
    )
    note = forms.CharField(label=_("Note"), max_length=200, required=False)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        chips = [(c.slug, c.label) for c in Chip.objects.filter(rentable=True).order_by("sort_order", "slug")]
        self.fields["chip"].choices = [*chips, ("", _("No-card mode (CPU only)"))]
        self.fields["chip"].required = False


class ProgrammeForm(forms.Form):
    slug = forms.SlugField(label=_("Short name"), max_length=50)
    name = forms.CharField(label=_("Name (English)"), max_length=100)
    name_zh = forms.CharField(label=_("Name (Chinese)"), max_length=100, required=False)
    rate = forms.DecimalField(
        label=pgettext_lazy("subsidy rate", "Rate"),
        max_digits=5,
        decimal_places=4,
        min_value=0,
        max_value=1,
        # xgettext:no-python-format
        help_text=_("0.10 takes 10% off."),
    )
    chips = forms.ModelMultipleChoiceField(
        label=_("Chips"), queryset=Chip.objects.filter(rentable=True), required=False, help_text=_("None: every chip.")
    )
    zones = forms.ModelMultipleChoiceField(
        label=_("Zones"), queryset=Zone.objects.all(), required=False, help_text=_("None: every zone.")
    )
    starts_at = forms.DateTimeField(label=_("Starts"), widget=DATETIME_LOCAL)
    ends_at = forms.DateTimeField(label=_("Ends"), widget=DATETIME_LOCAL, required=False)
    budget = AmountField(
        label=_("Total budget (CNY)"),
        max_digits=12,
        decimal_places=2,
        min_value=0,
        required=False,
        help_text=_("Empty: no limit."),
    )
    monthly_cap_per_user = AmountField(
        label=_("Monthly cap per user (CNY)"),
        max_digits=12,
        decimal_places=2,
        min_value=0,
        required=False,
        help_text=_("Empty: no cap."),
    )
    eligibility = forms.ChoiceField(label=_("Eligibility"), choices=Eligibility.choices)
    reason = _reason(required=False)


class BudgetForm(forms.Form):
    budget = AmountField(
        label=_("Total budget (CNY)"),
        max_digits=12,
        decimal_places=2,
        min_value=0,
        required=False,
        help_text=_("Empty: no limit."),
    )
    reason = _reason()


class ReviewForm(forms.Form):
    decision = forms.ChoiceField(choices=[("approve", _("Approve")), ("reject", _("Reject"))])
    reason = _reason(required=False, label=_("Reason (the applicant sees it)"))


class AuditSearchForm(forms.Form):
    q = forms.CharField(label=_("Search"), required=False, max_length=200)
    action = forms.ChoiceField(
        label=_("Action"), required=False, choices=[("", _("All actions")), *AuditAction.choices]
    )


class UserSearchForm(forms.Form):
    q = forms.CharField(label=_("E-mail"), required=False, max_length=254)


class MonthForm(forms.Form):
    month = forms.DateField(label=_("Month"), input_formats=["%Y-%m"], widget=forms.DateInput(attrs={"type": "month"}))


class VoucherBatchForm(forms.Form):
    name = forms.CharField(label=_("Name (English)"), max_length=100)
    name_zh = forms.CharField(label=_("Name (Chinese)"), max_length=100, required=False)
    amount = AmountField(
        label=_("Amount per voucher (CNY)"), max_digits=12, decimal_places=2, min_value=Decimal("0.01")
    )
    expires_at = forms.DateTimeField(label=_("Expires"), widget=DATETIME_LOCAL)
    quantity = forms.IntegerField(label=_("How many"), min_value=1, max_value=10_000)
    one_per_user = forms.BooleanField(label=_("One per person"), required=False, initial=True)
    shared_code = forms.CharField(
        label=_("Shared code"),
        max_length=32,
        required=False,
        help_text=_(
            "Empty: a code of its own for each voucher. A code (e.g. WELCOME2026): one code, used that many times."
        ),
    )
    min_spend = AmountField(
        label=_("Minimum spend (CNY)"),
        max_digits=12,
        decimal_places=2,
        min_value=0,
        required=False,
        help_text=_("Empty or 0: pays for any covered charge. Above 0: only for a prepaid plan costing at least this."),
    )
    chips = forms.ModelMultipleChoiceField(
        label=_("Chips"), queryset=Chip.objects.filter(rentable=True), required=False, help_text=_("None: every chip.")
    )
    zones = forms.ModelMultipleChoiceField(
        label=_("Zones"), queryset=Zone.objects.all(), required=False, help_text=_("None: every zone.")
    )
    plans = forms.ModelMultipleChoiceField(
        label=_("Plans"), queryset=Plan.objects.filter(active=True), required=False, help_text=_("None: every plan.")
    )
    reason = _reason(required=False)
