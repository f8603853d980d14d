"""Instances and what they record: events, the simulated backend's jobs and faults, agent reports, training
scalars; and the owners' secrets they boot with. The catalog they run on (zones, chips, nodes, specs) is the
``catalog`` app's."""

import uuid

from django.conf import settings
from django.core.validators import MaxValueValidator
from django.db import models
from django.db.models import Q
from django.db.models.functions import Coalesce
from django.urls import reverse
from django.utils.translation import gettext_lazy as _

from catalog.models import Chip, InstanceSpec, Node, Zone
from core.labels import label_of

from .choices import BADGE_COLOURS, LIVE, PRICED, Reason, Status, TermEnd, Wanted
from .querysets import InstanceQuerySet, SecretQuerySet, WaitingLaunchQuerySet


class Instance(models.Model):
    """A rented machine: ``cards`` cards of ``chip`` (no chip: the CPU-only no-card mode) in ``zone``.

    ``status`` is what the instance is; ``wanted`` what its owner asked for, which the tasks and the reconcile beat
    drive it towards. Only ``instances.statemachine.transition`` changes ``status``. ``node`` is the instance's home
    (its system disk lives there) and stays set while it is stopped; ``reserved_cards`` are the cards it holds on
    that node right now (0 when stopped), changed together with ``Node.cards_reserved`` by compare-and-set.
    """

    class Kind(models.TextChoices):
        INSTANCE = "instance", _("Instance")
        ENDPOINT = "endpoint", _("Inference endpoint")

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="instances")
    # Who launched it: the owner, or for a team's instance the member (kept when they leave the team).
    launched_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        verbose_name=_("launched by"),
    )
    name = models.CharField(_("name"), max_length=64)
    kind = models.CharField(
        _("kind"),
        max_length=16,
        choices=Kind.choices,
        default=Kind.INSTANCE,
        help_text=_("An endpoint serves an inference template (instances.endpoints); metered as its kind."),
    )
    zone = models.ForeignKey(Zone, on_delete=models.PROTECT, related_name="instances")
    chip = models.ForeignKey(
        Chip, on_delete=models.PROTECT, related_name="instances", null=True, blank=True, help_text=_("Empty: no-card")
    )
    spec = models.ForeignKey(InstanceSpec, on_delete=models.PROTECT, related_name="instances")
    cards = models.PositiveSmallIntegerField(_("cards"), default=0)
    node = models.ForeignKey(Node, on_delete=models.PROTECT, related_name="instances", null=True, blank=True)
    reserved_cards = models.PositiveSmallIntegerField(_("cards held"), default=0)
    # CPU (thousandths of a vCPU) and memory it holds while it holds its cards (0 when stopped): on its node, or on
    # the host of a backend whose nodes share one (``HostLoad``). Freed by compare-and-set, like the cards.
    reserved_cpu_millis = models.PositiveIntegerField(_("CPU held (thousandths of a vCPU)"), default=0)
    reserved_memory_mb = models.PositiveIntegerField(_("RAM held (MB)"), default=0)
    plan = models.ForeignKey("billing.Plan", on_delete=models.PROTECT, related_name="instances")
    spot = models.BooleanField(_("spot"), default=False)
    term_end_action = models.CharField(
        _("at the end of a prepaid term"), max_length=16, choices=TermEnd.choices, default=TermEnd.CONTINUE
    )
    term_ends_at = models.DateTimeField(_("prepaid term ends"), null=True, blank=True)
    image = models.CharField(_("image"), max_length=64, help_text=_("A base image slug (marketplace variants later)."))
    status = models.CharField(_("status"), max_length=16, choices=Status.choices, default=Status.CREATING)
    status_reason = models.CharField(_("status reason"), max_length=32, choices=Reason.choices, blank=True)
    status_detail = models.CharField(_("status detail"), max_length=255, blank=True)
    wanted = models.CharField(_("wanted state"), max_length=16, choices=Wanted.choices, default=Wanted.RUNNING)
    backend_name = models.CharField(_("compute backend"), max_length=32, default="simulated")
    backend_job_id = models.CharField(_("backend job id"), max_length=64, blank=True)
    access = models.JSONField(_("access details"), default=dict, blank=True)
    price_per_hour = models.DecimalField(
        _("payable per hour (CNY)"),
        max_digits=16,
        decimal_places=6,
        null=True,
        blank=True,
        help_text=_("The hourly rate of its current run, or of the run it is starting."),
    )
    # What the machine runs at every boot and with which environment (``instances.environment``). The variables
    # are plain text the owner sees again; ``secret_names`` only names the owner's secrets, whose values are looked
    # up at each boot, so a secret changed since the launch gives its new value and a deleted one is left out.
    start_command = models.TextField(
        _("start command"), blank=True, help_text=_("Run with /bin/sh -c at every boot; empty: the image's default.")
    )
    env = models.JSONField(_("environment variables"), default=dict, blank=True)
    secret_names = models.JSONField(
        _("secrets"), default=list, blank=True, help_text=_("Names of the owner's secrets.")
    )
    # A run that ends by itself: where the backend has a scheduler (Slurm's ``--time``), it ends the machine's job
    # this many minutes after it started. Empty: the machine runs until it is stopped.
    time_limit_minutes = models.PositiveIntegerField(_("time limit (minutes)"), null=True, blank=True)
    # Launched with ``auto``: the figures behind the chip picked (``instances.choosing``); empty otherwise.
    choice = models.JSONField(_("choice"), default=dict, blank=True)
    auto_shutdown_at = models.DateTimeField(_("shut down at"), null=True, blank=True)
    idle_shutdown_minutes = models.PositiveIntegerField(_("shut down after idle minutes"), null=True, blank=True)
    idle_threshold_percent = models.PositiveSmallIntegerField(
        _("idle below card utilisation (%)"), default=5, validators=[MaxValueValidator(100)]
    )
    running_since = models.DateTimeField(_("running since"), null=True, blank=True)
    stop_requested_at = models.DateTimeField(_("stop requested"), null=True, blank=True)
    stopped_at = models.DateTimeField(_("stopped"), null=True, blank=True)
    release_at = models.DateTimeField(_("released automatically at"), null=True, blank=True)
    release_reminders_sent = models.PositiveSmallIntegerField(default=0)
    created_at = models.DateTimeField(_("created"), auto_now_add=True)
    updated_at = models.DateTimeField(_("updated"), auto_now=True)

    objects = InstanceQuerySet.as_manager()

    class Meta:
        verbose_name = _("instance")
        verbose_name_plural = _("instances")
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["owner", "-created_at"], name="instance_owner_recent"),
            models.Index(fields=["status"], name="instance_status"),
        ]
        constraints = [
            models.CheckConstraint(condition=Q(reserved_cards__lte=models.F("cards")), name="instance_holds_its_cards"),
        ]

    def __str__(self):
        return f"{self.name} ({self.public_id})"

    def get_absolute_url(self):
        return reverse("instances:detail", args=[self.public_id])

    @property
    def badge(self) -> str:
        return BADGE_COLOURS.get(self.status, "secondary")

    def get_status_display(self) -> str:
        return label_of(Status, self.status)

    @property
    def is_live(self) -> bool:
        return self.status in LIVE

    @property
    def billed_rate(self):
        """The hourly price to show: the rate of the run under way or starting; None while nothing is billed
        (stopped, failed, released…), even though ``price_per_hour`` keeps the last run's rate."""
        return self.price_per_hour if self.status in PRICED else None

    @property
    def family(self) -> str | None:
        return self.chip.backend if self.chip_id else None


class Secret(models.Model):
    """A value a user keeps for their instances (an API key, a password), given to the instances that name it as
    the environment variable ``name`` at every boot (``instances.environment``). The value is encrypted at rest
    (``core.encryption``) and never shown again once saved: pages, the API and the admin show the name and when
    it last changed, nothing else. ``instances.secrets`` writes and reads it."""

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="secrets")
    name = models.CharField(_("name"), max_length=64)
    value_encrypted = models.TextField(editable=False)
    created_at = models.DateTimeField(_("created"), auto_now_add=True)
    updated_at = models.DateTimeField(_("last updated"), auto_now=True)

    objects = SecretQuerySet.as_manager()

    class Meta:
        verbose_name = _("secret")
        verbose_name_plural = _("secrets")
        ordering = ["name"]
        constraints = [models.UniqueConstraint(fields=["owner", "name"], name="secret_name_once_per_owner")]

    def __str__(self):
        return self.name


class InstanceEvent(models.Model):
    """An append-only row per transition (old → new) or notice (old = new): the timeline, metering and
    notifications read these, they never guess."""

    instance = models.ForeignKey(Instance, on_delete=models.CASCADE, related_name="events")
    old = models.CharField(_("from"), max_length=16, choices=Status.choices, blank=True)
    new = models.CharField(_("to"), max_length=16, choices=Status.choices)
    reason = models.CharField(_("reason"), max_length=32, choices=Reason.choices)
    detail = models.CharField(_("detail"), max_length=255, blank=True)
    data = models.JSONField(default=dict, blank=True, help_text=_("E.g. the rate frozen when it started running."))
    at = models.DateTimeField(_("at"), db_index=True)

    class Meta:
        verbose_name = _("instance event")
        verbose_name_plural = _("instance events")
        ordering = ["at", "id"]

    def __str__(self):
        return f"{self.instance_id}: {self.old or '·'} → {self.new} ({self.reason})"

    # The timeline shows three labels a row: by the enums' own lookup (``label_of``), not the generic display.
    def get_old_display(self) -> str:
        return label_of(Status, self.old)

    def get_new_display(self) -> str:
        return label_of(Status, self.new)

    def get_reason_display(self) -> str:
        return label_of(Reason, self.reason)

    @property
    def is_transition(self) -> bool:
        return self.old != self.new


class SimulatedJob(models.Model):
    """The simulated data centre's record of one instance's machine, kept in the database so the web, worker and
    beat processes see the same data centre. Phases follow from the timestamps (see backends/simulated.py)."""

    job_id = models.CharField(max_length=64, unique=True)
    instance_id = models.UUIDField(unique=True, help_text=_("The instance's public id."))
    node = models.ForeignKey(Node, on_delete=models.SET_NULL, null=True, blank=True, related_name="simulated_jobs")
    cards = models.PositiveSmallIntegerField(default=0)
    image = models.CharField(max_length=64)
    submitted_at = models.DateTimeField()
    ready_at = models.DateTimeField(null=True, blank=True, help_text=_("Empty: hangs while booting."))
    signalled_at = models.DateTimeField(null=True, blank=True, help_text=_("Checkpoint signal (SIGUSR1) sent."))
    stop_at = models.DateTimeField(null=True, blank=True)
    preempted_at = models.DateTimeField(null=True, blank=True)
    crashed_at = models.DateTimeField(null=True, blank=True)
    released_at = models.DateTimeField(null=True, blank=True)
    idle = models.BooleanField(default=False, help_text=_("Simulate a workload that leaves the cards idle."))
    disks = models.JSONField(default=list, blank=True)
    mounts = models.JSONField(default=list, blank=True)

    class Meta:
        verbose_name = _("simulated job")
        verbose_name_plural = _("simulated jobs")

    def __str__(self):
        return self.job_id


class SimulatedFault(models.Model):
    """A fault the simulated backend injects into its next submissions (tests and demos)."""

    class Kind(models.TextChoices):
        FAIL_SUBMIT = "fail_submit", _("Refuse the submission")
        HANG = "hang", _("Hang while booting")

    kind = models.CharField(max_length=16, choices=Kind.choices)
    remaining = models.PositiveIntegerField(default=1)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = _("simulated fault")
        verbose_name_plural = _("simulated faults")

    def __str__(self):
        return f"{self.kind} × {self.remaining}"


class AgentReport(models.Model):
    """A report from an instance's agent (the Slurm backend's jobs): a heartbeat with card utilisation and memory,
    a checkpoint marker, or the workload's exit. An instance is running, and billed, once its current job's agent
    has reported; the metrics chart reads these rows."""

    class Event(models.TextChoices):
        STARTED = "started", _("Agent started")
        HEARTBEAT = "heartbeat", _("Heartbeat")
        CHECKPOINT = "checkpoint", _("Checkpoint marker written")
        EXITED = "exited", _("Workload exited")

    instance = models.ForeignKey(Instance, on_delete=models.CASCADE, related_name="agent_reports")
    job_id = models.CharField(_("backend job id"), max_length=64)
    event = models.CharField(_("event"), max_length=16, choices=Event.choices)
    at = models.DateTimeField(_("at"))
    source = models.CharField(
        _("metrics source"), max_length=16, help_text=_("npu-smi, cnmon, hy-smi, nvidia-smi, or host (CPU/memory)")
    )
    card_utilisation = models.FloatField(_("card utilisation (%)"))
    memory_used = models.FloatField(_("memory used (%)"))
    data = models.JSONField(default=dict, blank=True, help_text=_("Per-card figures, the checkpoint marker."))

    class Meta:
        verbose_name = _("agent report")
        verbose_name_plural = _("agent reports")
        ordering = ["-at", "-id"]
        indexes = [
            models.Index(fields=["instance", "job_id"], name="agentreport_instance_job"),
            models.Index(fields=["instance", "at"], name="agentreport_instance_at"),
        ]

    def __str__(self):
        return f"{self.instance_id} job {self.job_id}: {self.event} at {self.at:%H:%M:%S}"


class TrainingScalar(models.Model):
    """A scalar the workload logged (loss, accuracy, …) at a training step, forwarded by the instance agent from
    the JSON lines the workload writes to ``$GPUCLOUD_SCALARS``: the training curves on the instance page."""

    instance = models.ForeignKey(Instance, on_delete=models.CASCADE, related_name="training_scalars")
    tag = models.CharField(_("tag"), max_length=64)
    step = models.PositiveBigIntegerField(_("step"))
    value = models.FloatField(_("value"))
    at = models.DateTimeField(_("logged at"))

    class Meta:
        verbose_name = _("training scalar")
        verbose_name_plural = _("training scalars")
        ordering = ["tag", "step"]
        constraints = [
            models.UniqueConstraint(fields=["instance", "tag", "step"], name="trainingscalar_once_per_step"),
        ]

    def __str__(self):
        return f"{self.instance_id} {self.tag}@{self.step} = {self.value}"


class HostLoad(models.Model):
    """CPU and memory held on the one host of a backend whose nodes all stand on it (the local backend: the
    console's own host). What the host has is measured, not stored (``instances.capacity.host_capacity``); a
    reservation is a compare-and-set against it, so concurrent launches never take more than the host has."""

    backend_name = models.CharField(_("compute backend"), max_length=32, unique=True)
    cpu_millis_reserved = models.PositiveIntegerField(_("CPU reserved (thousandths of a vCPU)"), default=0)
    memory_mb_reserved = models.PositiveIntegerField(_("RAM reserved (MB)"), default=0)

    class Meta:
        verbose_name = _("host load")
        verbose_name_plural = _("host loads")

    def __str__(self):
        return f"{self.backend_name}: {self.cpu_millis_reserved / 1000:g} vCPU, {self.memory_mb_reserved} MB"


class AccountLimit(models.Model):
    """How many machines an account (a person or a team's account) may hold at once, and how many of them CPU-only.
    The row without an account is the default for everyone (``ACCOUNT_MAX_MACHINES`` and ``ACCOUNT_MAX_CPU_ONLY``
    when there is none); an account's own row raises or lowers it for that account. An empty figure: the
    default's. Edited in the back office."""

    account = models.OneToOneField(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="+",
        verbose_name=_("account"),
        help_text=_("Empty: the default for every account."),
    )
    max_machines = models.PositiveSmallIntegerField(
        _("machines at once"),
        null=True,
        blank=True,
        help_text=_("Creating, starting, running or stopping. Empty: the default."),
    )
    max_cpu_only = models.PositiveSmallIntegerField(
        _("CPU-only machines at once"),
        null=True,
        blank=True,
        help_text=_("Of those, without cards. Empty: the default."),
    )
    updated_at = models.DateTimeField(_("updated"), auto_now=True)

    class Meta:
        verbose_name = _("account limit")
        verbose_name_plural = _("account limits")
        constraints = [
            # One default row: the account column with NULL read as 0 is unique.
            models.UniqueConstraint(Coalesce("account", models.Value(0)), name="one_account_limit_per_account"),
        ]

    def __str__(self):
        return str(self.account) if self.account_id else str(_("Default for every account"))


class DailyPowerSchedule(models.Model):
    """An instance's daily stop and start times (定时开关机), read in a time zone: the housekeeping beat stops it
    at ``stop_at`` and starts it again at ``start_at`` each day (either may be empty). ``done_until`` is the latest
    of those times already acted on, moved on by compare-and-set, so each time acts once even when two beats
    overlap, and a beat that was down acts once, for the latest time it missed, when it is back."""

    instance = models.OneToOneField(Instance, on_delete=models.CASCADE, related_name="daily_power")
    stop_at = models.TimeField(_("stop daily at"), null=True, blank=True)
    start_at = models.TimeField(_("start daily at"), null=True, blank=True)
    timezone = models.CharField(_("time zone"), max_length=64, default="Asia/Shanghai")
    done_until = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = _("daily stop and start")
        verbose_name_plural = _("daily stops and starts")

    def __str__(self):
        return f"{self.instance_id}: stop {self.stop_at}, start {self.start_at} ({self.timezone})"


class WaitingLaunch(models.Model):
    """A launch that asked to wait for a card and found none free: it waits in the console's one queue, beside the
    jobs and in the same fair order (``instances.queue``), until the placement pass launches it on a freed card.
    ``request`` is the launch request as data, launched as it was asked; ``instance`` is set once it started. It
    leaves the queue when its owner cancels it or when the balance can no longer pay its first hour (``detail``
    says why). Only ``instances.waiting`` changes ``state``, by compare-and-set."""

    class State(models.TextChoices):
        WAITING = "waiting", _("Waiting for a card")
        STARTED = "started", _("Started")
        LEFT = "left", _("Left the queue")

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="waiting_launches")
    launched_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    name = models.CharField(_("name"), max_length=64)
    request = models.JSONField(_("launch request"), default=dict)
    # What it waits for, as the queue compares it with the jobs': a chip, or a family's cheapest free chip.
    chip = models.ForeignKey(Chip, on_delete=models.PROTECT, null=True, blank=True, related_name="+")
    family = models.CharField(_("family"), max_length=8, blank=True)
    cards = models.PositiveSmallIntegerField(_("cards"), default=1)
    spot = models.BooleanField(_("spot"), default=False)
    state = models.CharField(_("state"), max_length=16, choices=State.choices, default=State.WAITING)
    detail = models.CharField(_("detail"), max_length=255, blank=True)
    instance = models.ForeignKey(Instance, on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    queued_at = models.DateTimeField(_("queued"))
    ended_at = models.DateTimeField(_("left the queue"), null=True, blank=True)

    objects = WaitingLaunchQuerySet.as_manager()

    class Meta:
        verbose_name = _("launch waiting for a card")
        verbose_name_plural = _("launches waiting for a card")
        ordering = ["-queued_at", "-id"]
        indexes = [models.Index(fields=["state", "queued_at"], name="waitinglaunch_state_queued")]

    def __str__(self):
        return f"{self.name} ({self.get_state_display()})"

    def get_absolute_url(self):
        return reverse("instances:waiting", args=[self.public_id])

    @property
    def is_waiting(self) -> bool:
        return self.state == self.State.WAITING
