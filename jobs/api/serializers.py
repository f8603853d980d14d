"""The jobs API's serializers."""

from decimal import Decimal

from django.core.validators import RegexValidator
from django.utils.translation import gettext_lazy
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from catalog.choices import SPEC_CARD_COUNTS
from core.api import strict
from core.api.ranges import positive_numbers
from core.api.validators import Pattern, display_name
from instances.api.serializers import VariablesField
from instances.logs import DEFAULT_TAIL, MAX_TAIL

from .. import outputs
from ..choices import JobBackend, State
from ..models import Job
from ..services import MAX_RETRIES, MAX_TIMEOUT_SECONDS, MIN_TIMEOUT_SECONDS, family_warning

MAX_CEILING = 10000  # CNY an hour: above any machine's price


class ClusterJobSerializer(strict.Serializer):
    job_id = serializers.CharField(read_only=True, help_text="The cluster's job id (Slurm's).")
    state = serializers.CharField(read_only=True, help_text="The cluster's job state, e.g. PENDING, RUNNING, TIMEOUT.")
    reason = serializers.CharField(
        read_only=True, help_text="Why the cluster's job waits or ended (squeue's %r), e.g. Resources."
    )


class JobSerializer(strict.ModelSerializer):
    id = serializers.UUIDField(source="public_id", read_only=True)
    chip = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    instance = serializers.UUIDField(source="instance.public_id", read_only=True, allow_null=True, default=None)
    choice_reason = serializers.CharField(read_only=True, help_text="Why the job runs where it does.")
    queue_position = serializers.SerializerMethodField(help_text="Place in the queue (1: next) while queued.")
    queue_expected_by = serializers.SerializerMethodField(
        help_text="While queued: the time by which the machines ahead of it must have freed its cards (their "
        "deadlines); null when nothing bounds it."
    )
    cluster_job = ClusterJobSerializer(
        read_only=True,
        allow_null=True,
        source="cluster_job_or_none",
        help_text="Where a cluster's own scheduler (Slurm) runs the job: its job there, state and pending reason.",
    )
    outputs = serializers.SerializerMethodField(
        help_text="The job's outputs folder in its owner's cloud storage (the storage API's path); the command "
        "sees it as $OUTPUT_DIR (not on a cluster's nodes, which do not mount cloud storage yet)."
    )

    class Meta:
        model = Job
        fields = [
            "id",
            "name",
            "image",
            "backend",
            "family",
            "chip",
            "choice_reason",
            "cards",
            "command",
            "timeout_seconds",
            "max_price_per_hour",
            "price_per_hour",
            "spot",
            "retries",
            "attempts",
            "state",
            "state_detail",
            "exit_code",
            "instance",
            "queue_position",
            "queue_expected_by",
            "cluster_job",
            "outputs",
            "created_at",
            "started_at",
            "ended_at",
        ]
        read_only_fields = fields

    def get_queue_position(self, job) -> int | None:
        place = self.context.get("places", {}).get(job.pk)
        return place.position if place else None

    @extend_schema_field(serializers.DateTimeField(allow_null=True))
    def get_queue_expected_by(self, job):
        place = self.context.get("places", {}).get(job.pk)
        return serializers.DateTimeField().to_representation(place.expected_by) if place and place.expected_by else None

    def get_outputs(self, job) -> str:
        return outputs.folder_path(job)


class SubmittedJobSerializer(JobSerializer):
    """A just-submitted job, with what the submission has to warn about (its image was built for another chip
    family than its cards')."""

    warnings = serializers.SerializerMethodField()

    class Meta(JobSerializer.Meta):
        fields = [*JobSerializer.Meta.fields, "warnings"]
        read_only_fields = fields

    def get_warnings(self, job) -> list[str]:
        warning = family_warning(job)
        return [warning] if warning else []


class JobCreateSerializer(strict.Serializer):
    """Submit: ``backend`` a family, ``cpu`` or ``auto`` (the cheapest per unit of work under the ceiling)."""

    name = serializers.CharField(max_length=64, validators=[display_name(64, gettext_lazy("job"))])
    image = serializers.CharField(max_length=64, help_text="An image variant slug; any variant of a multi-arch image.")
    # At most 1,024 characters: within the 4,096 bytes a start command may have, whatever the characters.
    command = serializers.CharField(
        max_length=1024,
        trim_whitespace=False,
        validators=[Pattern(r"^[^\x00]*\S[^\x00]*$", code="invalid_command")],
        help_text="Run with /bin/sh -c; not only spaces, no NUL character.",
    )
    backend = serializers.ChoiceField(choices=JobBackend.choices, default=JobBackend.AUTO)
    cards = serializers.ChoiceField(choices=list(SPEC_CARD_COUNTS), default=1)
    timeout_seconds = serializers.IntegerField(min_value=MIN_TIMEOUT_SECONDS, max_value=MAX_TIMEOUT_SECONDS)
    max_price_per_hour = serializers.DecimalField(
        max_digits=12,
        decimal_places=2,
        required=False,
        allow_null=True,
        default=None,
        min_value=Decimal("0.01"),
        max_value=Decimal(MAX_CEILING),
        validators=[RegexValidator(positive_numbers(MAX_CEILING, places=2))],
    )
    spot = serializers.BooleanField(default=False)
    retries = serializers.IntegerField(default=0, min_value=0, max_value=MAX_RETRIES)
    env = VariablesField(
        child=serializers.CharField(allow_blank=True, trim_whitespace=False),
        required=False,
        default=dict,
        help_text="Plain environment variables, NAME → text value, as an instance's.",
    )


class JobListQuerySerializer(strict.Serializer):
    state = serializers.ChoiceField(choices=State.choices, required=False, help_text="Only jobs in this state.")


class JobLogsQuerySerializer(strict.Serializer):
    tail = serializers.IntegerField(default=DEFAULT_TAIL, min_value=1, max_value=MAX_TAIL)


class JobLogsSerializer(strict.Serializer):
    lines = serializers.ListField(child=serializers.CharField(allow_blank=True))
    simulated = serializers.BooleanField(help_text="True on the simulated backend: there is no machine, so no logs.")
    live = serializers.BooleanField(help_text="The job has not ended: more lines may come (the CLI's --follow).")
