"""Jobs: a command run to its end on a machine of a chip family, which is released the moment the command ends or
its timeout hits, and the events each job went through."""

import uuid

from django.conf import settings
from django.db import models
from django.urls import reverse
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from billing.display import format_cny_rate
from catalog.models import Chip
from instances import choosing
from instances.models import Instance

from .choices import BADGE_COLOURS, LIVE, JobBackend, State
from .querysets import JobQuerySet


class Job(models.Model):
    """A command to run once to its end: ``cards`` cards of a family (or ``auto``, or the CPU) booted from
    ``image``, the command run with /bin/sh -c as the machine's start command. The machine it runs on is an
    ``Instance`` the job launches and releases; the bill is that instance's charges. ``owner`` owns and pays (a
    person or a team's account, as for instances); ``submitted_by`` is the person who asked. Only
    ``jobs.statemachine.transition`` changes ``state``."""

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="jobs")
    submitted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    name = models.CharField(_("name"), max_length=64)
    image = models.CharField(_("image"), max_length=64, help_text=_("An image variant's slug, as a launch takes it."))
    backend = models.CharField(_("backend"), max_length=8, choices=JobBackend.choices, default=JobBackend.AUTO)
    cards = models.PositiveSmallIntegerField(_("cards"), default=1)
    command = models.TextField(_("command"), help_text=_("Run with /bin/sh -c."))
    env = models.JSONField(_("environment variables"), default=dict, blank=True)
    timeout_seconds = models.PositiveIntegerField(_("timeout (seconds)"))
    max_price_per_hour = models.DecimalField(
        _("price ceiling per hour (CNY)"), max_digits=16, decimal_places=6, null=True, blank=True
    )
    spot = models.BooleanField(_("spot"), default=False)
    retries = models.PositiveSmallIntegerField(_("retries"), default=0)
    attempts = models.PositiveSmallIntegerField(_("attempts"), default=0)
    state = models.CharField(_("state"), max_length=16, choices=State.choices, default=State.QUEUED)
    state_detail = models.CharField(_("state detail"), max_length=255, blank=True)
    exit_code = models.SmallIntegerField(_("exit code"), null=True, blank=True)
    chip = models.ForeignKey(Chip, on_delete=models.PROTECT, null=True, blank=True, related_name="+")
    family = models.CharField(_("family"), max_length=8, blank=True, help_text=_("The family it runs on."))
    # The figures behind the choice (chip, price, throughput, cost per unit of work, how many families were
    # compared), kept as figures so each reader sees the reason in their own language.
    choice = models.JSONField(_("choice"), default=dict, blank=True)
    price_per_hour = models.DecimalField(
        _("payable per hour (CNY)"), max_digits=16, decimal_places=6, null=True, blank=True
    )
    instance = models.ForeignKey(Instance, on_delete=models.SET_NULL, null=True, blank=True, related_name="jobs")
    # Where a cluster's own scheduler runs the machine (Slurm): its job there as the cluster shows it, read at each
    # watch — {"job_id", "state", "reason"}, e.g. PENDING / Resources while the cluster's cards are all taken.
    cluster_job = models.JSONField(_("cluster job"), default=dict, blank=True)
    # The last lines the command wrote, kept when its machine is released (the machine's log goes with it).
    log = models.TextField(_("log"), blank=True)
    queued_at = models.DateTimeField(_("queued"), null=True, blank=True)
    created_at = models.DateTimeField(_("created"), auto_now_add=True)
    started_at = models.DateTimeField(_("started"), null=True, blank=True)
    ended_at = models.DateTimeField(_("ended"), null=True, blank=True)

    objects = JobQuerySet.as_manager()

    class Meta:
        verbose_name = _("job")
        verbose_name_plural = _("jobs")
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["owner", "-created_at"], name="job_owner_recent"),
            models.Index(fields=["state", "queued_at"], name="job_state_queued"),
        ]

    def __str__(self):
        return f"{self.name} ({self.public_id})"

    def get_absolute_url(self):
        return reverse("jobs:detail", args=[self.public_id])

    @property
    def badge(self) -> str:
        return BADGE_COLOURS.get(self.state, "secondary")

    @property
    def cluster_job_or_none(self) -> dict | None:
        return self.cluster_job or None

    @property
    def is_live(self) -> bool:
        return self.state in LIVE

    @property
    def choice_reason(self) -> str:
        """Why the job runs where it does, in the active language."""
        c = self.choice
        if not c:
            return ""
        if c.get("rule") == "cheapest_per_work":
            return choosing.reason(c)
        if c.get("rule") == "cpu":
            return gettext("No cards: the job runs on the CPU at %(price)s/h.") % {"price": format_cny_rate(c["price"])}
        return gettext("%(chip)s, the cheapest chip of the family you chose, at %(price)s/h.") % {
            "chip": c["chip"],
            "price": format_cny_rate(c["price"]),
        }


class JobEvent(models.Model):
    """An append-only row per transition of a job (old → new) or notice (old = new): the job page's timeline."""

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="events")
    old = models.CharField(_("from"), max_length=16, choices=State.choices, blank=True)
    new = models.CharField(_("to"), max_length=16, choices=State.choices)
    detail = models.CharField(_("detail"), max_length=255, blank=True)
    at = models.DateTimeField(_("at"), db_index=True)

    class Meta:
        verbose_name = _("job event")
        verbose_name_plural = _("job events")
        ordering = ["at", "id"]

    def __str__(self):
        return f"{self.job_id}: {self.old or '·'} → {self.new}"


class JobSchedule(models.Model):
    """A job's request run on a cron schedule in a time zone (定时任务): each time it is due the beat submits an
    ordinary ``Job`` (its own machine, logs and bill), unless the previous run is still going and overlap is not
    allowed. ``next_run_at`` is the one due time ahead; the beat moves it on with a compare-and-set, so two beats
    never submit the same run, and runs missed while the beat was down become one run, not many."""

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="job_schedules")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    name = models.CharField(_("name"), max_length=64)
    image = models.CharField(_("image"), max_length=64)
    backend = models.CharField(_("backend"), max_length=8, choices=JobBackend.choices, default=JobBackend.AUTO)
    cards = models.PositiveSmallIntegerField(_("cards"), default=1)
    command = models.TextField(_("command"))
    env = models.JSONField(_("environment variables"), default=dict, blank=True)
    timeout_seconds = models.PositiveIntegerField(_("timeout (seconds)"))
    max_price_per_hour = models.DecimalField(
        _("price ceiling per hour (CNY)"), max_digits=16, decimal_places=6, null=True, blank=True
    )
    spot = models.BooleanField(_("spot"), default=False)
    retries = models.PositiveSmallIntegerField(_("retries"), default=0)
    cron = models.CharField(_("schedule (cron)"), max_length=100)
    timezone = models.CharField(_("time zone"), max_length=64, default="Asia/Shanghai")
    suspended = models.BooleanField(_("suspended"), default=False)
    allow_overlap = models.BooleanField(
        _("allow overlap"), default=False, help_text=_("Start a run even while the previous one is still going.")
    )
    next_run_at = models.DateTimeField(_("next run"), null=True, blank=True)
    created_at = models.DateTimeField(_("created"), auto_now_add=True)

    objects = JobQuerySet.as_manager()

    class Meta:
        verbose_name = _("job schedule")
        verbose_name_plural = _("job schedules")
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["suspended", "next_run_at"], name="jobschedule_due")]

    def __str__(self):
        return f"{self.name} ({self.cron}, {self.timezone})"

    def get_absolute_url(self):
        return reverse("jobs:schedule", args=[self.public_id])


class ScheduleRun(models.Model):
    """One due time of a schedule and what became of it: a job submitted, a run skipped (the previous one was still
    going) or refused (the balance, the request). Append-only; one row per due time."""

    class Outcome(models.TextChoices):
        SUBMITTED = "submitted", _("Submitted")
        SKIPPED = "skipped", _("Skipped")
        REFUSED = "refused", _("Refused")

    schedule = models.ForeignKey(JobSchedule, on_delete=models.CASCADE, related_name="runs")
    due_at = models.DateTimeField(_("due"))
    outcome = models.CharField(_("outcome"), max_length=16, choices=Outcome.choices)
    job = models.ForeignKey(Job, on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    detail = models.CharField(_("detail"), max_length=255, blank=True)
    at = models.DateTimeField(_("at"))

    class Meta:
        verbose_name = _("schedule run")
        verbose_name_plural = _("schedule runs")
        ordering = ["-due_at", "-id"]
        constraints = [models.UniqueConstraint(fields=["schedule", "due_at"], name="schedulerun_once_per_due_time")]

    def __str__(self):
        return f"{self.schedule_id} at {self.due_at}: {self.outcome}"
