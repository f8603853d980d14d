import copy
from functools import partial

from django.core import validators
from django.core.exceptions import ValidationError as DjangoValidationError
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from drf_spectacular.extensions import OpenApiSerializerExtension
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from billing.api.serializers import SPOT_ONLY_ON_PAY_AS_YOU_GO
from billing.estimator import FIELD_LABELS, LIMITS, check_positive
from billing.quote import MAX_CARDS
from catalog.models import Chip, InstanceSpec, Zone
from core.api import strict
from core.api.ranges import positive_numbers
from core.api.schema import FLAG_SET
from core.api.validators import Pattern, display_name
from core.errors import ServiceError
from instances import choosing
from instances.costs import cost_so_far

from ..choices import Backend, TermEnd
from ..environment import MAX_VARIABLES
from ..environment_variables import MAX_NAME_LENGTH, NAME_PATTERN, check_name
from ..images import image_name, launch_warning
from ..logs import DEFAULT_TAIL, MAX_TAIL
from ..models import Instance, InstanceEvent


class ScalingFigureSerializer(strict.Serializer):
    cards = serializers.IntegerField()
    efficiency = serializers.DecimalField(max_digits=5, decimal_places=4)


class ResNet50Serializer(strict.Serializer):
    precision = serializers.CharField(source="resnet50_precision")
    images_per_s = serializers.IntegerField(source="resnet50_images_per_s")
    latency_ms = serializers.DecimalField(source="resnet50_latency_ms", max_digits=7, decimal_places=2)
    demo_price_per_hour = serializers.DecimalField(
        source="resnet50_demo_price_per_hour", max_digits=8, decimal_places=2, allow_null=True
    )


class ChipSerializer(strict.ModelSerializer):
    """A chip and its published figures; null means the operator has not published the figure."""

    scaling_efficiency = ScalingFigureSerializer(source="scaling_figures", many=True, read_only=True)
    resnet50 = serializers.SerializerMethodField()
    backend = serializers.ChoiceField(
        choices=Backend.choices,
        allow_blank=True,
        read_only=True,
        help_text="The software family the chip runs; empty for a chip that is only compared, not rented.",
    )

    class Meta:
        model = Chip
        fields = [
            "slug",
            "name",
            "name_zh",
            "vendor",
            "backend",
            "xinchuang",
            "rentable",
            "memory_gb",
            "memory_type",
            "memory_bandwidth_tbs",
            "tflops_bf16",
            "tflops_fp16",
            "measured_tflops_bf16",
            "measured_tflops_fp16",
            "mfu",
            "interconnect",
            "interconnect_gbs",
            "scaling_efficiency",
            "glm70b_tokens_per_s",
            "resnet50",
            "software",
            "note",
        ]
        read_only_fields = fields

    @extend_schema_field(ResNet50Serializer(allow_null=True))
    def get_resnet50(self, chip):
        return ResNet50Serializer(chip).data if chip.resnet50_images_per_s else None


class ZoneOfferSerializer(strict.Serializer):
    chip = serializers.SerializerMethodField()
    nodes = serializers.IntegerField()
    cards = serializers.IntegerField()

    def get_chip(self, offer) -> str:
        return self.context["chip_slugs"][offer.chip_id]


class ZoneSerializer(strict.ModelSerializer):
    region = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    region_name = serializers.CharField(source="region.label", read_only=True)
    offers = serializers.SerializerMethodField()

    class Meta:
        model = Zone
        fields = ["slug", "name", "name_zh", "region", "region_name", "xinchuang", "offers"]
        read_only_fields = fields

    @extend_schema_field(ZoneOfferSerializer(many=True))
    def get_offers(self, zone):
        offers = self.context["offers_by_zone"].get(zone.pk, [])
        return ZoneOfferSerializer(offers, many=True, context=self.context).data


class InstanceSpecSerializer(strict.ModelSerializer):
    chip = serializers.SlugRelatedField(slug_field="slug", read_only=True, allow_null=True)
    no_card = serializers.BooleanField(source="is_no_card", read_only=True)

    class Meta:
        model = InstanceSpec
        fields = ["slug", "chip", "cards", "no_card", "vcpus", "memory_gb", "system_disk_gb"]
        read_only_fields = fields


class _PositiveNumber(validators.RegexValidator):
    """A number above zero up to the estimator's limit for ``name``: the schema states it as a pattern; a value
    refused is told what the estimator says of it."""

    def __init__(self, name: str):
        super().__init__(positive_numbers(LIMITS[name]))
        self.name = name

    def __call__(self, value):
        try:
            super().__call__(format(value, "f"))  # the number as written out (str() may say 1E-8)
        except DjangoValidationError:
            try:
                check_positive(self.name, value, LIMITS[self.name])
            except ServiceError as exc:
                raise serializers.ValidationError(str(exc.message)) from exc
            label = FIELD_LABELS[self.name]
            raise serializers.ValidationError(_("%(field)s must be a number.") % {"field": label}) from None


def _number(name, required=True, help_text=""):
    # Optional ones are simply left out (or sent empty): a query string has no null.
    return serializers.DecimalField(
        max_digits=None,
        decimal_places=None,
        required=required,
        validators=[_PositiveNumber(name)],
        help_text=help_text,
    )


class TrainingEstimateQuerySerializer(strict.Serializer):
    params_b = _number("params_b", help_text="Model parameters, in billions.")
    tokens_b = _number("tokens_b", help_text="Training tokens, in billions.")
    chip = serializers.SlugField(help_text="A chip slug from /api/v1/chips.")
    cards = serializers.IntegerField(
        required=False, min_value=1, max_value=MAX_CARDS, help_text="Optional: otherwise the estimator picks."
    )
    deadline_days = _number("deadline_days", required=False, help_text="Optional deadline in days.")
    budget_cny = _number("budget_cny", required=False, help_text="Optional budget in CNY.")


def _money(**kwargs):
    return serializers.DecimalField(max_digits=20, decimal_places=2, coerce_to_string=True, **kwargs)


class TrainingEstimateSerializer(strict.Serializer):
    chip = serializers.CharField(source="chip.slug")
    params_b = serializers.DecimalField(max_digits=None, decimal_places=None, source="job.params_b")
    tokens_b = serializers.DecimalField(max_digits=None, decimal_places=None, source="job.tokens_b")
    cards = serializers.IntegerField()
    min_cards_for_memory = serializers.IntegerField()
    cards_for_deadline = serializers.IntegerField(allow_null=True)
    fits_memory = serializers.BooleanField()
    mfu = serializers.DecimalField(max_digits=5, decimal_places=4)
    peak_tflops = serializers.DecimalField(max_digits=8, decimal_places=3)
    scaling_efficiency = serializers.DecimalField(max_digits=5, decimal_places=4)
    days = serializers.DecimalField(max_digits=20, decimal_places=2)
    gpu_hours = serializers.DecimalField(max_digits=24, decimal_places=2, source="card_hours")
    cost_cny = _money(source="cost", allow_null=True)
    plan = serializers.CharField(source="quote.plan_slug", allow_null=True, default=None)
    fits_deadline = serializers.BooleanField(allow_null=True)
    fits_budget = serializers.BooleanField(allow_null=True)
    problem = serializers.CharField()
    assumptions = serializers.DictField()


def not_published_message(chip, missing) -> str:
    return _("%(chip)s cannot be estimated: the operator has not published its %(figures)s.") % {
        "chip": chip.name,
        "figures": ", ".join(missing),
    }


# Instances ----------------------------------------------------------------------------------------------------


class InstanceEventSerializer(strict.ModelSerializer):
    old = serializers.CharField(read_only=True, help_text="The status before (empty for the first event).")
    new = serializers.CharField(read_only=True, help_text="The status after (the same as old for a notice).")
    reason = serializers.CharField(read_only=True)
    reason_display = serializers.CharField(source="get_reason_display", read_only=True)

    class Meta:
        model = InstanceEvent
        fields = ["at", "old", "new", "reason", "reason_display", "detail"]
        read_only_fields = fields


class InstanceSerializer(strict.ModelSerializer):
    """An instance. ``access`` details of the simulated backend carry ``"simulated": true``. ``env`` holds the plain
    variables with their values; ``secrets`` only names the secrets it boots with."""

    id = serializers.UUIDField(source="public_id", read_only=True)
    zone = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    chip = serializers.SlugRelatedField(slug_field="slug", read_only=True, allow_null=True)
    backend = serializers.CharField(source="family", read_only=True, allow_null=True)
    spec = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    plan = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    node = serializers.CharField(source="node.name", read_only=True, allow_null=True, default=None)
    status_display = serializers.CharField(source="get_status_display", read_only=True)
    image_name = serializers.SerializerMethodField()
    price_per_hour = serializers.DecimalField(max_digits=16, decimal_places=6, read_only=True, allow_null=True)
    env = serializers.DictField(child=serializers.CharField(), read_only=True)
    secrets = serializers.ListField(child=serializers.CharField(), source="secret_names", read_only=True)

    class Meta:
        model = Instance
        fields = [
            "id",
            "name",
            "status",
            "status_display",
            "status_reason",
            "status_detail",
            "wanted",
            "zone",
            "chip",
            "backend",
            "cards",
            "spec",
            "node",
            "image",
            "image_name",
            "plan",
            "spot",
            "term_end_action",
            "term_ends_at",
            "price_per_hour",
            "access",
            "backend_name",
            "auto_shutdown_at",
            "idle_shutdown_minutes",
            "idle_threshold_percent",
            "running_since",
            "stopped_at",
            "release_at",
            "created_at",
            "start_command",
            "env",
            "secrets",
        ]
        read_only_fields = fields

    def get_image_name(self, instance) -> str:
        return image_name(instance.image)

    # What a row reads of its relations: each is named by its slug (a node by its name; a chip's family too).
    RELATED_COLUMNS = ("zone__slug", "chip__slug", "chip__backend", "spec__slug", "plan__slug", "node__name")

    @classmethod
    def columns(cls) -> list[str]:
        """The columns a list of instances reads for this serializer (``only()``): a page of fifty rows with every
        column of five related tables was most of the list's time."""
        own = {field.name for field in Instance._meta.concrete_fields}
        declared = cls._declared_fields
        sources = [(getattr(declared.get(name), "source", None) or name).split(".")[0] for name in cls.Meta.fields]
        return [source for source in dict.fromkeys(sources) if source in own] + list(cls.RELATED_COLUMNS)


class LaunchedInstanceSerializer(InstanceSerializer):
    """A just-launched instance, with what the launch has to warn about (its image was built for another chip
    family than its cards')."""

    warnings = serializers.SerializerMethodField()

    class Meta(InstanceSerializer.Meta):
        fields = [*InstanceSerializer.Meta.fields, "warnings"]
        read_only_fields = fields

    def get_warnings(self, instance) -> list[str]:
        warning = launch_warning(instance)
        return [warning] if warning else []


class InstanceDetailSerializer(InstanceSerializer):
    events = InstanceEventSerializer(many=True, read_only=True)
    cost_so_far = serializers.SerializerMethodField()
    choice_reason = serializers.SerializerMethodField(
        help_text="Launched with backend auto: why this chip (the cheapest per unit of work); empty otherwise."
    )

    class Meta(InstanceSerializer.Meta):
        fields = [*InstanceSerializer.Meta.fields, "cost_so_far", "choice_reason", "events"]
        read_only_fields = fields

    def get_choice_reason(self, instance) -> str:
        return choosing.reason(instance.choice) if instance.choice else ""

    @extend_schema_field(serializers.DecimalField(max_digits=14, decimal_places=2))
    def get_cost_so_far(self, instance) -> str:
        return str(cost_so_far(instance, instance.events.all()))


def _variable_value() -> dict:
    """A variable's value in the schema: text without a NUL character (an environment cannot hold one)."""
    return {"type": "string", "pattern": r"^[^\x00]*$"}


@extend_schema_field(
    {
        "type": "object",
        "additionalProperties": _variable_value(),
        # OpenAPI 3.0 has no keyword for an object's keys (patternProperties and propertyNames are not in its
        # Schema Object), so the rule for names is the x-patternProperties extension: tools that turn OpenAPI 3.0
        # into JSON Schema read it as patternProperties when asked to (openapi-schema-to-json-schema's
        # supportPatternProperties), and as additionalProperties is the same value schema, they take any other
        # name as invalid. A tool that does not know the extension still reads the values' rule and the count.
        "x-patternProperties": {
            rf"^[A-Za-z_][A-Za-z0-9_]{{0,{MAX_NAME_LENGTH - 1}}}$": _variable_value(),
        },
        "maxProperties": MAX_VARIABLES,
    }
)
class VariablesField(serializers.DictField):
    """Environment variables, NAME → text (``instances.environment`` checks them)."""


class BootOptionsSerializer(strict.Serializer):
    """What a launched instance boots with (``instances.environment`` checks them: a refusal names the field)."""

    start_command = serializers.CharField(
        required=False,
        allow_blank=True,
        trim_whitespace=False,
        default="",
        help_text="Run with /bin/sh -c at every boot (at most 4096 bytes); its output is the instance's logs. "
        "Empty: the image's default.",
    )
    env = VariablesField(
        child=serializers.CharField(allow_blank=True, trim_whitespace=False),
        required=False,
        default=dict,
        help_text="Plain environment variables, NAME → text value (at most 64, values up to 4096 bytes). Names are "
        "letters, digits and underscores; HOME, PATH, the card-visibility variables and names starting with "
        "GPUCLOUD_, JUPYTER_ or SLURM_ are the platform's. Shown again in the instance's details: not for secrets.",
    )
    secrets = serializers.ListField(
        child=serializers.CharField(
            min_length=1,
            max_length=64,
            validators=[Pattern(rf"^{NAME_PATTERN.pattern}$", refuse=partial(check_name, field="secrets"))],
        ),
        required=False,
        default=list,
        max_length=64,
        help_text="Names of your secrets (/api/v1/secrets) given to the instance as variables of the same name.",
    )


class InstanceCreateSerializer(BootOptionsSerializer):
    """Launch: give ``chip`` (a slug) or ``backend`` (npu, mlu, dcu, cuda: the cheapest chip of that family with
    free cards is picked) or ``no_card``."""

    name = serializers.CharField(max_length=64, validators=[display_name(64, gettext_lazy("instance"))])
    image = serializers.CharField(max_length=64, help_text="An image variant slug for the chip's family.")
    chip = serializers.CharField(required=False, allow_blank=True, default="")
    backend = serializers.ChoiceField(
        choices=[*Backend.choices, (choosing.AUTO, "auto")],
        required=False,
        allow_blank=True,
        default="",
        help_text="A family (its cheapest chip with free cards), or auto: the chip cheapest per unit of work among "
        "the families the image has a variant for (the reason is on the instance).",
    )
    no_card = serializers.BooleanField(required=False, default=False)
    cards = serializers.IntegerField(required=False, default=1, min_value=0, max_value=8)
    zone = serializers.CharField(required=False, allow_blank=True, default="")
    plan = serializers.CharField(required=False, default="payg")
    spot = serializers.BooleanField(required=False, default=False)
    term_end_action = serializers.ChoiceField(choices=TermEnd.choices, required=False, default=TermEnd.CONTINUE)
    auto_shutdown_at = serializers.DateTimeField(required=False, allow_null=True, default=None)
    idle_shutdown_minutes = serializers.IntegerField(
        required=False, allow_null=True, default=None, min_value=5, max_value=7 * 24 * 60
    )
    data_disk_gb = serializers.IntegerField(
        required=False, default=0, min_value=0, help_text="A new cloud disk of this many GB, attached (0: none)."
    )
    mounts = serializers.ListField(
        child=serializers.CharField(min_length=1, max_length=201),
        required=False,
        default=list,
        max_length=16,
        help_text="Hub models and datasets (org/name) to mount read-only at /root/public or /root/datasets.",
    )
    wait_for_card = serializers.BooleanField(
        required=False,
        default=False,
        help_text="When no card is free: wait in the queue (202, a waiting launch with its place) instead of a 503; "
        "it starts when a card frees, and leaves the queue if the balance can no longer pay its first hour.",
    )


def _given(name: str, value: dict) -> dict:
    return {"required": [name], "properties": {name: value}}


class InstanceCreateSchema(OpenApiSerializerExtension):
    """The launch request's rules across fields, which the view refuses with a 400 (``invalid_chip``,
    ``spot_not_offered``): one of a chip, a backend family or the no-card mode; spot only on pay-as-you-go (the
    default plan)."""

    target_class = "instances.api.serializers.InstanceCreateSerializer"

    def map_serializer(self, auto_schema, direction):
        schema = auto_schema._map_serializer(self.target, direction, bypass_extensions=True)
        if direction == "request":
            chip, backend = _given("chip", {"minLength": 1}), _given("backend", {"minLength": 1})
            no_card = _given("no_card", FLAG_SET)
            schema["allOf"] = [
                {"anyOf": [chip, backend, no_card]},
                {"not": {"allOf": [chip, backend]}},
                {"not": {"allOf": [no_card, {"anyOf": [chip, backend]}]}},
                copy.deepcopy(SPOT_ONLY_ON_PAY_AS_YOU_GO),  # the schema's hooks rewrite what they are given
            ]
        return schema


class InstanceLogsQuerySerializer(strict.Serializer):
    tail = serializers.IntegerField(
        required=False, default=DEFAULT_TAIL, min_value=1, max_value=MAX_TAIL, help_text="How many lines, newest last."
    )


class InstanceLogsSerializer(strict.Serializer):
    """The tail of what the start command wrote, stdout and stderr together, oldest line first."""

    lines = serializers.ListField(child=serializers.CharField(allow_blank=True))
    simulated = serializers.BooleanField(help_text="True on the simulated backend: there is no machine, so no logs.")
    live = serializers.BooleanField(help_text="The instance is live: more lines may come (the CLI's --follow).")


class InstanceStartSerializer(strict.Serializer):
    no_card = serializers.BooleanField(
        required=False, default=False, help_text="Start CPU-only when the zone has no free cards."
    )


class CapacityAlternativeSerializer(strict.Serializer):
    zone = serializers.CharField()
    chip = serializers.CharField()
    free_cards = serializers.IntegerField()
    max_cards = serializers.IntegerField()


class CapacityErrorSerializer(strict.Serializer):
    code = serializers.CharField()
    message = serializers.CharField()
    alternatives = CapacityAlternativeSerializer(many=True)
    no_card_offered = serializers.BooleanField()


class TrainingCurvesSerializer(strict.Serializer):
    """``curves``: tag → [[step, value], …], oldest first (the last 2,000 points of each tag)."""

    simulated = serializers.BooleanField(help_text="True on the simulated backend: the quick-start script's curve.")
    curves = serializers.DictField(
        child=serializers.ListField(
            child=serializers.ListField(child=serializers.FloatField(), min_length=2, max_length=2)
        )
    )
