"""The pricing calculator's form (choices come from the price book so rendering it costs no queries), the training
estimator's (limits from the estimator, so page and API refuse the same inputs) and the wallet's forms."""

from decimal import Decimal, InvalidOperation

from django import forms
from django.utils.translation import gettext_lazy as _

from catalog.choices import SPEC_CARD_COUNTS
from catalog.models import Chip
from core.errors import ServiceError

from .choices import TERM_UNIT_MINUTES, TermUnit, TransactionKind
from .estimator import FIELD_LABELS, LIMITS, TrainingJob, check_positive
from .models import Invoice
from .money import AMOUNT_TEXT_MESSAGE, is_plain_amount
from .quote import MAX_CARDS, MAX_TERM_MINUTES
from .rules import check_listing_date

NO_CARD = "no-card"
DEFAULT_CHIP = "ascend-910b"
# What the calculator shows before a visitor changes anything: one 910B card for an hour, pay-as-you-go.
DEFAULT_QUERY = {"chip": DEFAULT_CHIP, "cards": "1", "plan": "payg", "term": "1", "term_unit": TermUnit.HOURS}


class QuoteForm(forms.Form):
    chip = forms.ChoiceField(label=_("Chip"), error_messages={"invalid_choice": _("Choose a chip from the list.")})
    cards = forms.TypedChoiceField(
        label=_("Cards"),
        coerce=int,
        choices=[(n, n) for n in SPEC_CARD_COUNTS],
        initial=1,
        error_messages={"invalid_choice": _("Choose 1, 2, 4 or 8 cards.")},
    )
    zone = forms.ChoiceField(label=_("Zone"), required=False)
    plan = forms.ChoiceField(label=_("Plan"), error_messages={"invalid_choice": _("Choose a plan from the list.")})
    spot = forms.BooleanField(label=_("Spot (preemptible, pay-as-you-go only)"), required=False)
    term = forms.DecimalField(
        label=_("Term"),
        min_value=Decimal("0.01"),
        max_value=Decimal(MAX_TERM_MINUTES),
        max_digits=12,
        decimal_places=2,
        initial=1,
        error_messages={
            "invalid": _("The term must be a number."),
            "min_value": _("The term must be at least 0.01."),
            "max_value": _("The term can be at most ten years."),
        },
    )
    term_unit = forms.ChoiceField(label=_("Unit"), choices=TermUnit.choices, initial=TermUnit.HOURS)

    def __init__(self, *args, chips=(), zones=(), plans=(), **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["chip"].choices = [(c.slug, c.label) for c in chips] + [(NO_CARD, _("No-card mode (CPU only)"))]
        self.fields["chip"].initial = DEFAULT_CHIP
        self.fields["zone"].choices = [("", _("Where it is offered (Xinchuang zone first)"))] + [
            (z.slug, z.label) for z in zones
        ]
        self.fields["plan"].choices = [(p.slug, p.label) for p in plans]
        self.fields["plan"].initial = "payg"

    def clean(self):
        data = super().clean()
        term, unit = data.get("term"), data.get("term_unit")
        if term is not None and unit and term * TERM_UNIT_MINUTES[unit] > MAX_TERM_MINUTES:
            self.add_error("term", _("The term can be at most ten years."))
        return data

    def term_minutes(self) -> Decimal:
        return self.cleaned_data["term"] * TERM_UNIT_MINUTES[self.cleaned_data["term_unit"]]


class AmountField(forms.DecimalField):
    """A money amount typed by a person, written the one plain way (``money.is_plain_amount``). Text that Decimal()
    would read but a person would not write so ("１００", "1_000", "1e3") gets the message saying how to write it;
    text that is no number at all keeps the field's own message."""

    def to_python(self, value):
        text = value.strip() if isinstance(value, str) else value
        if isinstance(text, str) and text and not is_plain_amount(text):
            try:
                Decimal(text)
            except InvalidOperation:
                pass
            else:
                raise forms.ValidationError(AMOUNT_TEXT_MESSAGE, code="invalid")
        return super().to_python(value)


class VoucherRedeemForm(forms.Form):
    """A voucher's code, as printed or sent (any case, with or without dashes)."""

    code = forms.CharField(
        label=_("Voucher code"), max_length=64, strip=True, error_messages={"required": _("Enter the voucher's code.")}
    )


class TopUpForm(forms.Form):
    """How much to top up, in yuan."""

    amount = AmountField(
        label=_("Amount (CNY)"),
        max_digits=12,
        decimal_places=2,
        error_messages={
            "invalid": _("The amount must be a number of yuan, e.g. 50 or 49.90."),
            "required": _("Enter an amount."),
            "max_decimal_places": _("The amount can have at most two decimal places (fen)."),
            "max_digits": _("The amount is too large."),
            "max_whole_digits": _("The amount is too large."),
        },
    )


class SpendingCapForm(forms.Form):
    """The monthly spending cap; empty removes it."""

    spending_cap = AmountField(
        label=_("Monthly spending cap (CNY)"),
        required=False,
        max_digits=12,
        decimal_places=2,
        min_value=0,
        error_messages={
            "invalid": _("The cap must be a number of yuan, e.g. 500."),
            "min_value": _("The cap cannot be negative."),
            "max_decimal_places": _("The cap can have at most two decimal places (fen)."),
            "max_digits": _("The cap is too large."),
            "max_whole_digits": _("The cap is too large."),
        },
    )


class TransactionFilterForm(forms.Form):
    """Filters of the transactions list."""

    kind = forms.ChoiceField(label=_("Kind"), required=False)
    since = forms.DateField(
        label=_("From"),
        required=False,
        error_messages={"invalid": _("Enter a valid date.")},
        validators=[check_listing_date],
    )
    until = forms.DateField(
        label=_("To"),
        required=False,
        error_messages={"invalid": _("Enter a valid date.")},
        validators=[check_listing_date],
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["kind"].choices = [("", _("All kinds"))] + list(TransactionKind.choices)

    def clean(self):
        data = super().clean()
        if data.get("since") and data.get("until") and data["since"] > data["until"]:
            self.add_error("until", _("The end date must be on or after the start date."))
        return data


class StatementMonthForm(forms.Form):
    month = forms.RegexField(
        label=_("Month"),
        regex=r"^20\d{2}-(0[1-9]|1[0-2])$",
        required=False,
        error_messages={"invalid": _("Give the month as YYYY-MM, e.g. 2026-03.")},
    )


class InvoiceRequestForm(forms.Form):
    kind = forms.ChoiceField(label=_("Type"), choices=Invoice.Kind.choices, initial=Invoice.Kind.GENERAL)
    title = forms.CharField(
        label=_("Title (抬头)"), max_length=200, required=False, help_text=_("Your name, or the company's name.")
    )
    tax_id = forms.CharField(
        label=_("Taxpayer ID"), max_length=40, required=False, help_text=_("A company's; a person leaves it empty.")
    )
    address = forms.CharField(label=_("Registered address"), max_length=200, required=False)
    phone = forms.CharField(label=_("Phone"), max_length=32, required=False)
    bank = forms.CharField(label=_("Bank"), max_length=100, required=False)
    bank_account = forms.CharField(
        label=_("Bank account"),
        max_length=60,
        required=False,
        help_text=_("Address, phone, bank and account: a special VAT invoice only."),
    )
    amount = forms.CharField(label=_("Amount (CNY)"), max_length=20)


# Shown before a visitor changes anything: a 7 B model on 300 B tokens within 30 days and ¥100,000.
ESTIMATOR_QUERY = {"params_b": "7", "tokens_b": "300", "deadline_days": "30", "budget_cny": "100000"}


def _field(name, required=True):
    return forms.DecimalField(
        label=FIELD_LABELS[name],
        required=required,
        error_messages={"invalid": _("Enter a number."), "required": _("This field is required.")},
        widget=forms.TextInput(attrs={"inputmode": "decimal", "class": "form-control"}),
    )


class EstimatorForm(forms.Form):
    params_b = _field("params_b")
    tokens_b = _field("tokens_b")
    deadline_days = _field("deadline_days", required=False)
    budget_cny = _field("budget_cny", required=False)
    chip = forms.ChoiceField(label=_("Chip"), required=False)
    cards = forms.IntegerField(
        label=_("Cards"),
        required=False,
        min_value=1,
        max_value=MAX_CARDS,
        error_messages={"invalid": _("Enter a whole number of cards.")},
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.chips = {chip.slug: chip for chip in Chip.objects.offered().with_figures()}
        self.fields["chip"].choices = [("", _("Every chip"))] + [(s, c.label) for s, c in self.chips.items()]

    def clean(self):
        data = super().clean()
        for name in LIMITS:
            value = data.get(name)
            if value is None:
                continue
            try:
                check_positive(name, value, LIMITS[name])
            except ServiceError as exc:
                self.add_error(name, str(exc.message))
        if data.get("cards") and not data.get("chip"):
            self.add_error("chip", _("Choose a chip to estimate on a given number of cards."))
        return data

    def estimate_on(self) -> dict:
        """The chips to estimate (the one chosen, or every chip offered) and the fixed card count, if any."""
        slug = self.cleaned_data.get("chip")
        chips = [self.chips[slug]] if slug else list(self.chips.values())
        return {"chips": chips, "cards": self.cleaned_data.get("cards")}

    def job(self) -> TrainingJob:
        data = self.cleaned_data
        return TrainingJob(
            params_b=data["params_b"],
            tokens_b=data["tokens_b"],
            deadline_days=data.get("deadline_days"),
            budget_cny=data.get("budget_cny"),
        )
