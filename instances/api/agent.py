"""The instance agent's endpoint: ``POST /api/v1/agent/instances/<id>/reports`` with ``Authorization: Agent …``.

Only the instance's own agent token is accepted here: no session, no user API token (and no CSRF, since no cookie
can authenticate). The answer tells the agent what its owner wants the instance to be.
"""

import math

from django.db import transaction
from django.utils.translation import gettext_lazy as _
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import exceptions, serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from core.api import strict

from .. import heartbeats
from ..backends.slurm import lab_address

EVENTS = ["started", "heartbeat", "checkpoint", "exited"]
SOURCES = ["npu-smi", "cnmon", "hy-smi", "nvidia-smi", "cgroup", "host"]


class CardSampleSerializer(strict.Serializer):
    index = serializers.IntegerField(min_value=0, max_value=255)
    utilisation = serializers.FloatField(min_value=0, max_value=100)
    memory_used = serializers.FloatField(min_value=0, max_value=100)


class AgentMetricsSerializer(strict.Serializer):
    source = serializers.ChoiceField(choices=SOURCES)
    card_utilisation = serializers.FloatField(min_value=0, max_value=100)
    memory_used = serializers.FloatField(min_value=0, max_value=100)
    cards = CardSampleSerializer(many=True, required=False, default=list)


class CheckpointSerializer(strict.Serializer):
    signal = serializers.CharField(max_length=16)
    at = serializers.DateTimeField()
    job_id = serializers.CharField(max_length=64, allow_blank=True)
    restart_count = serializers.IntegerField(min_value=0)


class ScalarSerializer(strict.Serializer):
    tag = serializers.CharField(max_length=64)
    step = serializers.IntegerField(min_value=0, max_value=2**62)
    value = serializers.FloatField()
    time = serializers.DateTimeField(required=False)

    def validate_value(self, value):
        if not math.isfinite(value):
            raise serializers.ValidationError(_("A scalar must be a finite number."))
        return value


class JupyterAddressSerializer(strict.Serializer):
    url = serializers.CharField(
        max_length=300, help_text="Where the instance's JupyterLab answers: http://<the node's address>:<port>."
    )

    def validate_url(self, value):
        # The agent runs as the owner's unix user, so this is the owner's word: the one shape the proxy may use, on
        # an unprivileged port. Whether the host is the job's node is checked where the address is used
        # (backends.slurm.lab_address_allowed): only Slurm knows the node.
        if lab_address(value) is None:
            raise serializers.ValidationError(_("A JupyterLab address is http://<node>:<port>, on port 1024 or above."))
        return value


class AgentReportSerializer(strict.Serializer):
    event = serializers.ChoiceField(choices=EVENTS)
    job_id = serializers.CharField(max_length=64, allow_blank=True)
    restart_count = serializers.IntegerField(min_value=0, default=0)
    cards = serializers.ListField(
        child=serializers.IntegerField(min_value=0, max_value=255), max_length=64, default=list
    )
    metrics = AgentMetricsSerializer()
    checkpoint = CheckpointSerializer(allow_null=True, required=False, default=None)
    scalars = serializers.ListField(
        child=ScalarSerializer(),
        max_length=1000,
        required=False,
        default=list,
        help_text="Training scalars the workload logged since the last report.",
    )
    jupyter = JupyterAddressSerializer(allow_null=True, required=False, default=None)
    exit_code = serializers.IntegerField(
        min_value=0,
        max_value=255,
        allow_null=True,
        required=False,
        default=None,
        help_text="With ``exited``: the workload's exit status (128 + N when signal N ended it).",
    )


class AgentAnswerSerializer(strict.Serializer):
    wanted = serializers.CharField()


class AgentReportView(APIView):
    authentication_classes: list = []
    permission_classes: list = []
    throttle_classes: list = []

    @extend_schema(
        tags=["agent"],
        summary="An instance agent's heartbeat, metrics or checkpoint (the agent's own token only)",
        request=AgentReportSerializer,
        responses={
            200: AgentAnswerSerializer,
            400: OpenApiResponse(description="Bad report"),
            401: OpenApiResponse(description="No agent token"),
            404: OpenApiResponse(description="No such instance, or not this token's"),
        },
    )
    def post(self, request, id=None):
        header = request.headers.get("Authorization", "").split()
        if len(header) != 2 or header[0].lower() != "agent":
            raise exceptions.NotAuthenticated(_("Send the instance's agent token: “Authorization: Agent <token>”."))
        instance = heartbeats.authenticate(id, header[1])
        body = AgentReportSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        with transaction.atomic():
            heartbeats.record(instance, _plain(body.validated_data))
            heartbeats.record_scalars(instance, body.validated_data["scalars"])
        return Response({"wanted": instance.wanted})

    def get_authenticate_header(self, request):
        return 'Agent realm="instance-agent"'


def _plain(data: dict) -> dict:
    """Validated data as JSON-ready values (the checkpoint time back to ISO text)."""
    checkpoint = data.get("checkpoint")
    if checkpoint:
        checkpoint = {**checkpoint, "at": checkpoint["at"].isoformat()}
    plain = {key: value for key, value in data.items() if key != "scalars"}
    jupyter = dict(data["jupyter"]) if data.get("jupyter") else None
    return {**plain, "checkpoint": checkpoint, "metrics": dict(data["metrics"]), "jupyter": jupyter}
