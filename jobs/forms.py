"""The submit form."""

from django import forms
from django.utils.translation import gettext_lazy as _

from instances.environment import parse_env_lines

from .choices import JobBackend
from .schedules import DEFAULT_TIMEZONE, ScheduleRequest
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


class ScheduleForm(JobForm):
    """The submit form with a cron expression and its zone: the job runs each time the schedule is due."""

    cron = forms.CharField(
        label=_("Schedule (cron)"),
        max_length=100,
        initial="0 2 * * *",
        help_text=_("Five cron fields (“0 2 * * *”: 02:00 every day) or @hourly, @daily, @weekly."),
    )
    timezone = forms.CharField(
        label=_("Time zone"), max_length=64, initial=DEFAULT_TIMEZONE, help_text=_("For example Asia/Shanghai.")
    )
    allow_overlap = forms.BooleanField(
        label=_("Start a run even while the previous one is still going"), required=False
    )

    def schedule_request(self) -> ScheduleRequest:
        data = self.cleaned_data
        return ScheduleRequest(
            job=self.job_request(), cron=data["cron"], timezone=data["timezone"], allow_overlap=data["allow_overlap"]
        )
