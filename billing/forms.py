"""The pricing calculator's form: choices come from the price book so rendering it costs no queries."""

from decimal import Decimal

from django import forms
from django.utils.translation import gettext_lazy as _

from instances.choices import SPEC_CARD_COUNTS

from .choices import TERM_UNIT_MINUTES, TermUnit
from .quote import MAX_TERM_MINUTES

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
