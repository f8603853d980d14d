"""The training estimator's form. Limits come from the estimator so page and API refuse the same inputs."""

from django import forms
from django.utils.translation import gettext_lazy as _

from console.errors import ServiceError

from .estimator import FIELD_LABELS, LIMITS, TrainingJob, check_positive

# Shown before a visitor changes anything: a 7 B model on 300 B tokens within 30 days and ¥100,000.
DEFAULT_QUERY = {"params_b": "7", "tokens_b": "300", "deadline_days": "30", "budget_cny": "100000"}


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
        return data

    def job(self) -> TrainingJob:
        data = self.cleaned_data
        return TrainingJob(
            params_b=data["params_b"],
            tokens_b=data["tokens_b"],
            deadline_days=data.get("deadline_days"),
            budget_cny=data.get("budget_cny"),
        )
