"""The catalog: regions, zones, chips with their published figures, nodes and instance specs.

Figures on a chip are the operator's published ones (catalog/seed/catalog.toml, from its articles). A figure that
was never published stays NULL and pages say "not published": nothing here is estimated. The catalog sits below
billing (prices are per chip) and instances (an instance runs on a node of a zone): it imports neither. Its
tables keep the names they had when the catalog lived in the instances app.
"""

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q
from django.utils.translation import get_language
from django.utils.translation import gettext_lazy as _

from .choices import DOMESTIC_BACKENDS, Backend
from .querysets import ChipQuerySet, InstanceSpecQuerySet, NodeQuerySet, ZoneQuerySet


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
        db_table = "instances_region"  # the table it had in the instances app
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
    egress = models.BooleanField(
        _("outbound network"),
        default=True,
        help_text=_("Machines here reach the internet (never the host or a private network); off: loopback only."),
    )
    sort_order = models.PositiveSmallIntegerField(default=0)

    objects = ZoneQuerySet.as_manager()

    class Meta:
        db_table = "instances_zone"  # the table it had in the instances app
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
        db_table = "instances_chip"  # the table it had in the instances app
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
        db_table = "instances_scalingfigure"  # the table it had in the instances app
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
            _("The Xinchuang zone holds domestic chips only; %(chip)s is not one.") % {"chip": chip.label}
        )


class Node(models.Model):
    """A host in a zone with ``cards`` cards of one chip, ``vcpus`` vCPUs and ``memory_gb`` of RAM. Instances
    reserve cards, CPU and memory on it by compare-and-set; check constraints refuse an oversold row. (The local
    backend's nodes all stand on the console's own host: their CPU and memory are counted once, for that host, in
    ``instances.HostLoad``.)"""

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
    vcpus = models.PositiveIntegerField(
        _("vCPUs"), default=128, validators=[MinValueValidator(1)], help_text=_("What instances may reserve.")
    )
    memory_gb = models.PositiveIntegerField(
        _("RAM (GB)"), default=1024, validators=[MinValueValidator(1)], help_text=_("What instances may reserve.")
    )
    # Thousandths of a vCPU and MB: a reservation is the spec's figures (or the local backend's cgroup limits).
    cpu_millis_reserved = models.PositiveIntegerField(
        _("CPU reserved (thousandths of a vCPU)"), default=0, help_text=_("Changed only by compare-and-set.")
    )
    memory_mb_reserved = models.PositiveIntegerField(
        _("RAM reserved (MB)"), default=0, help_text=_("Changed only by compare-and-set.")
    )
    created_at = models.DateTimeField(auto_now_add=True)

    objects = NodeQuerySet.as_manager()

    class Meta:
        db_table = "instances_node"  # the table it had in the instances app
        verbose_name = _("node")
        verbose_name_plural = _("nodes")
        ordering = ["zone", "name"]
        constraints = [
            models.UniqueConstraint(fields=["zone", "name"], name="node_name_unique_in_zone"),
            models.CheckConstraint(condition=Q(cards__gte=1), name="node_has_cards"),
            # The database itself refuses an oversold node, whatever code path tries.
            models.CheckConstraint(condition=Q(cards_reserved__lte=models.F("cards")), name="node_never_oversold"),
            models.CheckConstraint(
                condition=Q(cpu_millis_reserved__lte=models.F("vcpus") * 1000), name="node_cpu_never_oversold"
            ),
            models.CheckConstraint(
                condition=Q(memory_mb_reserved__lte=models.F("memory_gb") * 1024), name="node_memory_never_oversold"
            ),
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
        db_table = "instances_instancespec"  # the table it had in the instances app
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
