"""The submit form."""

from django import forms
from django.utils.translation import gettext_lazy as _

from instances.environment import parse_env_lines

from .choices import JobBackend
from .services import MAX_RETRIES, JobRequest

TIMEOUT_UNITS = [("60", _("minutes")), ("3600", _("hours"))]


class JobForm(forms.Form):
    name = forms.CharField(label=_("Name"), max_length=64)
    image = forms.CharField(
        label=_("Image"), max_length=64, initial="pytorch-2.2-cuda12", help_text=_("Any variant of a multi-arch image.")
    )
    backend = forms.ChoiceField(label=_("Backend"), choices=JobBackend.choices, initial=JobBackend.AUTO)
    cards = forms.IntegerField(label=_("Cards"), min_value=1, max_value=8, initial=1)
    command = forms.CharField(
        label=_("Command"), widget=forms.Textarea(attrs={"rows": 3}), help_text=_("Run with /bin/sh -c.")
    )
    env = forms.CharField(
        label=_("Environment variables"),
        required=False,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text=_("One NAME=value a line."),
    )
    timeout = forms.IntegerField(label=_("Timeout"), min_value=1, initial=1)
    timeout_unit = forms.ChoiceField(label=_("Unit"), choices=TIMEOUT_UNITS, initial="3600")
    max_price_per_hour = forms.DecimalField(
        label=_("Price ceiling per hour (CNY)"), required=False, min_value=0, decimal_places=2, max_digits=12
    )
    spot = forms.BooleanField(label=_("Spot (preemptible, cheaper)"), required=False)
    retries = forms.IntegerField(label=_("Retries on failure"), min_value=0, max_value=MAX_RETRIES, initial=0)

    def job_request(self) -> JobRequest:
        data = self.cleaned_data
        return JobRequest(
            name=data["name"],
            image=data["image"],
            command=data["command"],
            backend=data["backend"],
            cards=data["cards"],
            timeout_seconds=data["timeout"] * int(data["timeout_unit"]),
            max_price_per_hour=data["max_price_per_hour"],
            spot=data["spot"],
            retries=data["retries"],
            env=parse_env_lines(data["env"]),
        )
