"""The catalog (regions, zones, chips with their published figures, nodes, instance specs) and instances.

Figures on a chip are the operator's published ones (instances/catalog/catalog.toml, from its articles). A
figure that was never published stays NULL and pages say "not published": nothing here is estimated.
"""

import uuid

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q
from django.urls import reverse
from django.utils.translation import get_language
from django.utils.translation import gettext_lazy as _

from .choices import BADGE_COLOURS, DOMESTIC_BACKENDS, LIVE, PRICED, Backend, Reason, Status, TermEnd, Wanted
from .querysets import ChipQuerySet, InstanceQuerySet, InstanceSpecQuerySet, NodeQuerySet, ZoneQuerySet


class BilingualName(models.Model):
    """A name kept in English and Chinese as data (the operator edits both in the back office)."""

    name = models.CharField(_("name (English)"), max_length=100)
    name_zh = models.CharField(_("name (Chinese)"), max_length=100, blank=True)

    class Meta:
        abstract = True

    def __str__(self):
        return self.label

    @property
    def label(self) -> str:
        """The name in the active language."""
        language = get_language() or ""
        return self.name_zh if language.startswith("zh") and self.name_zh else self.name


class Region(BilingualName):
    """A geographic region (e.g. 华东 cn-east) that groups zones."""

    slug = models.SlugField(unique=True)
    sort_order = models.PositiveSmallIntegerField(default=0)

    class Meta:
        verbose_name = _("region")
        verbose_name_plural = _("regions")
        ordering = ["sort_order", "slug"]


class Zone(BilingualName):
    """An availability zone. A Xinchuang zone (信创专区) holds domestic chips only."""

    region = models.ForeignKey(Region, on_delete=models.PROTECT, related_name="zones")
    slug = models.SlugField(unique=True)
    xinchuang = models.BooleanField(
        _("Xinchuang zone"), default=False, help_text=_("Domestic chips only; domestic OS images available.")
    )
    active = models.BooleanField(_("active"), default=True)
    sort_order = models.PositiveSmallIntegerField(default=0)

    objects = ZoneQuerySet.as_manager()

    class Meta:
        verbose_name = _("zone")
        verbose_name_plural = _("zones")
        ordering = ["region__sort_order", "sort_order", "slug"]

    def clean(self):
        # Turning an existing zone into a Xinchuang zone must not leave foreign cards in it.
        if self.xinchuang and self.pk:
            if self.nodes.filter(chip__xinchuang=False).exists():
                raise ValidationError(
                    {"xinchuang": _("This zone still has nodes with non-domestic chips; move them first.")}
                )


def _figure(max_digits=8, places=3, **kwargs):
    """A published figure: NULL when the operator has not published it."""
    return models.DecimalField(max_digits=max_digits, decimal_places=places, null=True, blank=True, **kwargs)


class Chip(BilingualName):
    """An accelerator model and its published figures."""

    slug = models.SlugField(unique=True)
    vendor = models.CharField(_("vendor"), max_length=64)
    backend = models.CharField(_("backend"), max_length=8, choices=Backend.choices, blank=True)
    xinchuang = models.BooleanField(
        _("domestic (Xinchuang)"), default=False, help_text=_("Eligible for the Xinchuang zone and its subsidy.")
    )
    rentable = models.BooleanField(
        _("rentable"), default=True, help_text=_("Off for reference chips shown on the comparison page only.")
    )
    memory_gb = models.PositiveIntegerField(_("memory (GB)"), null=True, blank=True)
    memory_type = models.CharField(_("memory type"), max_length=16, blank=True)
    memory_bandwidth_tbs = _figure(verbose_name=_("memory bandwidth (TB/s)"))
    tflops_bf16 = _figure(verbose_name=_("theoretical BF16 TFLOPS"))
    tflops_fp16 = _figure(verbose_name=_("theoretical FP16 TFLOPS"))
    measured_tflops_bf16 = _figure(verbose_name=_("measured BF16 TFLOPS"))
    measured_tflops_fp16 = _figure(verbose_name=_("measured FP16 TFLOPS"))
    mfu = _figure(
        max_digits=5,
        places=4,
        verbose_name=_("MFU (LLaMA3-70B training)"),
        validators=[MinValueValidator(0), MaxValueValidator(1)],
    )
    interconnect = models.CharField(_("interconnect"), max_length=32, blank=True)
    interconnect_gbs = models.PositiveIntegerField(_("interconnect bandwidth per card (GB/s)"), null=True, blank=True)
    glm70b_tokens_per_s = models.PositiveIntegerField(_("GLM-70B training tokens/s"), null=True, blank=True)
    resnet50_precision = models.CharField(_("ResNet-50 precision"), max_length=8, blank=True)
    resnet50_images_per_s = models.PositiveIntegerField(_("ResNet-50 images/s (batch 128)"), null=True, blank=True)
    resnet50_latency_ms = _figure(max_digits=7, places=2, verbose_name=_("ResNet-50 latency (ms)"))
    resnet50_demo_price_per_hour = _figure(
        max_digits=8, places=2, verbose_name=_("ResNet-50 demo instance price per hour (as published)")
    )
    software = models.JSONField(_("software stack"), default=list, blank=True)
    note = models.TextField(_("note"), blank=True, help_text=_("Where the operator's sources disagree."))
    sort_order = models.PositiveSmallIntegerField(default=0)

    objects = ChipQuerySet.as_manager()

    class Meta:
        verbose_name = _("chip")
        verbose_name_plural = _("chips")
        ordering = ["sort_order", "slug"]
        constraints = [
            models.CheckConstraint(condition=Q(rentable=False) | ~Q(backend=""), name="rentable_chip_has_backend"),
        ]

    def clean(self):
        if self.rentable and not self.backend:
            raise ValidationError({"backend": _("A rentable chip needs a backend family.")})
        if self.xinchuang and self.backend and self.backend not in DOMESTIC_BACKENDS:
            raise ValidationError({"xinchuang": _("Only domestic chip families can be Xinchuang chips.")})

    @property
    def measured_ratio_bf16(self):
        """Measured over theoretical BF16 TFLOPS, when both are published."""
        if self.tflops_bf16 and self.measured_tflops_bf16 is not None:
            return self.measured_tflops_bf16 / self.tflops_bf16
        return None


class ScalingFigure(models.Model):
    """A published linear scaling efficiency of a cluster of ``cards`` cards of a chip."""

    chip = models.ForeignKey(Chip, on_delete=models.CASCADE, related_name="scaling_figures")
    cards = models.PositiveIntegerField(_("cluster size (cards)"), validators=[MinValueValidator(2)])
    efficiency = models.DecimalField(
        _("scaling efficiency"),
        max_digits=5,
        decimal_places=4,
        validators=[MinValueValidator(0), MaxValueValidator(1)],
    )

    class Meta:
        verbose_name = _("scaling figure")
        verbose_name_plural = _("scaling figures")
        ordering = ["chip", "cards"]
        constraints = [models.UniqueConstraint(fields=["chip", "cards"], name="one_scaling_figure_per_size")]

    def __str__(self):
        return f"{self.chip.slug} × {self.cards}: {self.efficiency}"


def check_zone_accepts(zone: Zone, chip: Chip) -> None:
    """The Xinchuang zone rule, in one place: only domestic chips there."""
    if zone.xinchuang and not chip.xinchuang:
        raise ValidationError(
            _("The Xinchuang zone holds domestic chips only; %(chip)s is not one.") % {"chip": chip.name}
        )


class Node(models.Model):
    """A host in a zone with ``cards`` cards of one chip. Capacity is counted in cards."""

    zone = models.ForeignKey(Zone, on_delete=models.PROTECT, related_name="nodes")
    chip = models.ForeignKey(Chip, on_delete=models.PROTECT, related_name="nodes")
    name = models.CharField(_("name"), max_length=64)
    cards = models.PositiveSmallIntegerField(_("cards"), validators=[MinValueValidator(1), MaxValueValidator(16)])
    backend_name = models.CharField(
        _("compute backend"), max_length=32, default="simulated", help_text=_("simulated, slurm, …")
    )
    drained = models.BooleanField(_("drained"), default=False, help_text=_("Takes no new instances."))
    cards_reserved = models.PositiveSmallIntegerField(
        _("cards reserved"), default=0, help_text=_("Held by instances; changed only by compare-and-set.")
    )
    created_at = models.DateTimeField(auto_now_add=True)

    objects = NodeQuerySet.as_manager()

    class Meta:
        verbose_name = _("node")
        verbose_name_plural = _("nodes")
        ordering = ["zone", "name"]
        constraints = [
            models.UniqueConstraint(fields=["zone", "name"], name="node_name_unique_in_zone"),
            models.CheckConstraint(condition=Q(cards__gte=1), name="node_has_cards"),
            # The database itself refuses an oversold node, whatever code path tries.
            models.CheckConstraint(condition=Q(cards_reserved__lte=models.F("cards")), name="node_never_oversold"),
        ]

    def __str__(self):
        return f"{self.name} ({self.zone.slug}, {self.cards}× {self.chip.slug})"

    @property
    def cards_free(self) -> int:
        return self.cards - self.cards_reserved

    def clean(self):
        if self.zone_id and self.chip_id:
            try:
                check_zone_accepts(self.zone, self.chip)
            except ValidationError as exc:
                raise ValidationError({"chip": exc.messages}) from exc
        if self.chip_id and not self.chip.rentable:
            raise ValidationError({"chip": _("A reference chip cannot be installed in a node.")})


class InstanceSpec(models.Model):
    """A rentable size: a chip × 1/2/4/8 cards with vCPU, RAM and system disk, or the CPU-only no-card mode."""

    slug = models.SlugField(unique=True)
    chip = models.ForeignKey(
        Chip, on_delete=models.PROTECT, related_name="specs", null=True, blank=True, help_text=_("Empty: no-card")
    )
    cards = models.PositiveSmallIntegerField(_("cards"), validators=[MaxValueValidator(8)])
    vcpus = models.PositiveSmallIntegerField(_("vCPUs"), validators=[MinValueValidator(1)])
    memory_gb = models.PositiveIntegerField(_("RAM (GB)"), validators=[MinValueValidator(1)])
    system_disk_gb = models.PositiveIntegerField(_("system disk (GB)"), validators=[MinValueValidator(1)])
    active = models.BooleanField(_("active"), default=True)

    objects = InstanceSpecQuerySet.as_manager()

    class Meta:
        verbose_name = _("instance spec")
        verbose_name_plural = _("instance specs")
        ordering = ["chip__sort_order", "chip__slug", "cards"]
        constraints = [
            models.UniqueConstraint(fields=["chip", "cards"], name="one_spec_per_chip_and_cards"),
            models.CheckConstraint(
                condition=(Q(chip__isnull=True) & Q(cards=0)) | (Q(chip__isnull=False) & Q(cards__in=[1, 2, 4, 8])),
                name="spec_cards_match_chip",
            ),
        ]

    def __str__(self):
        return self.slug

    @property
    def is_no_card(self) -> bool:
        return self.chip_id is None

    def clean(self):
        if self.chip_id is None and self.cards != 0:
            raise ValidationError({"cards": _("The no-card mode has 0 cards.")})
        if self.chip_id is not None and self.cards not in (1, 2, 4, 8):
            raise ValidationError({"cards": _("A spec has 1, 2, 4 or 8 cards.")})


class Instance(models.Model):
    """A rented machine: ``cards`` cards of ``chip`` (no chip: the CPU-only no-card mode) in ``zone``.

    ``status`` is what the instance is; ``wanted`` what its owner asked for, which the tasks and the reconcile beat
    drive it towards. Only ``instances.services.transition`` changes ``status``. ``node`` is the instance's home
    (its system disk lives there) and stays set while it is stopped; ``reserved_cards`` are the cards it holds on
    that node right now (0 when stopped), changed together with ``Node.cards_reserved`` by compare-and-set.
    """

    class Kind(models.TextChoices):
        INSTANCE = "instance", _("Instance")
        ENDPOINT = "endpoint", _("Inference endpoint")

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="instances")
    name = models.CharField(_("name"), max_length=64)
    kind = models.CharField(
        _("kind"), max_length=16, choices=Kind.choices, default=Kind.INSTANCE,
        help_text=_("An endpoint serves an inference template (instances.endpoints); metered as its kind."),
    )  # fmt: skip
    zone = models.ForeignKey(Zone, on_delete=models.PROTECT, related_name="instances")
    chip = models.ForeignKey(
        Chip, on_delete=models.PROTECT, related_name="instances", null=True, blank=True, help_text=_("Empty: no-card")
    )
    spec = models.ForeignKey(InstanceSpec, on_delete=models.PROTECT, related_name="instances")
    cards = models.PositiveSmallIntegerField(_("cards"), default=0)
    node = models.ForeignKey(Node, on_delete=models.PROTECT, related_name="instances", null=True, blank=True)
    reserved_cards = models.PositiveSmallIntegerField(_("cards held"), default=0)
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
        _("payable per hour (CNY)"), max_digits=16, decimal_places=6, null=True, blank=True,
        help_text=_("The hourly rate of its current run, or of the run it is starting."),
    )  # fmt: skip
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


# Inference endpoints are instances of kind "endpoint"; their keys and request log live beside them.
from .endpoint_models import Endpoint, EndpointKey, EndpointRequest  # noqa: E402, F401


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
