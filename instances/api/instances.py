"""Instance endpoints: launch, list, detail, logs, and the start/stop/release actions. Owners only (404 otherwise)."""

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import mixins, renderers, status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from core.api.errors import ErrorSerializer
from instances import costs, launching, lifecycle, logs, waiting
from teams import roles
from teams.context import acting
from teams.models import TeamEvent
from teams.services import record

from ..models import Instance, WaitingLaunch
from .serializers import (
    CapacityErrorSerializer,
    InstanceCreateSerializer,
    InstanceDetailSerializer,
    InstanceLogsQuerySerializer,
    InstanceLogsSerializer,
    InstanceSerializer,
    InstanceStartSerializer,
    LaunchedInstanceSerializer,
    TrainingCurvesSerializer,
)
from .waiting import WaitingLaunchSerializer, waiting_response

ERRORS = {
    400: OpenApiResponse(ErrorSerializer, description="Bad input, with a message saying what to change."),
    402: OpenApiResponse(ErrorSerializer, description="Not enough balance for one hour (or the prepaid term)."),
    404: OpenApiResponse(ErrorSerializer, description="No such instance (or not yours)."),
    409: OpenApiResponse(ErrorSerializer, description="The instance's state does not allow this action."),
    503: OpenApiResponse(CapacityErrorSerializer, description="Out of capacity; where cards are free now."),
}

LOGS_UNAVAILABLE = OpenApiResponse(ErrorSerializer, description="The logs cannot be read right now.")


class PlainTextRenderer(renderers.BaseRenderer):
    """The logs as plain text, one line each, for ``Accept: text/plain`` (curl, a terminal)."""

    media_type = "text/plain"
    format = "txt"
    charset = "utf-8"

    def render(self, data, accepted_media_type=None, renderer_context=None):
        lines = data.get("lines", []) if isinstance(data, dict) else []
        return "".join(f"{line}\n" for line in lines).encode(self.charset)


@extend_schema(tags=["instances"])
@extend_schema_view(list=extend_schema(summary="Your instances (released ones with ?all=1)"))
class InstanceViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    serializer_class = InstanceSerializer
    team_scoped = True  # a team's token lists, launches and acts on the team's instances
    lookup_field = "public_id"
    lookup_url_kwarg = "id"
    lookup_value_regex = "[^/]+"

    def get_queryset(self):
        if self.action != "list":
            return Instance.objects.for_user(self.request.user).with_related()
        # The list is the context's: the caller's own, or through a team's token the team's (acting checked the
        # membership); endpoints are listed by /api/v1/endpoints.
        instances = Instance.objects.filter(owner=acting(self.request).account).with_related().not_endpoints()
        instances = instances.only(*InstanceSerializer.columns())
        if self.request.query_params.get("all") not in {"1", "true"}:
            instances = instances.visible()
        return instances

    def get_object(self):
        # One lookup for every action: a malformed id, a missing instance and someone else's are the same 404; a
        # team role that may read but not act gets a 403 for a POST.
        action = "view" if self.request.method in ("GET", "HEAD") else "change"
        return lifecycle.get_instance(self.request.user, self.kwargs["id"], action)

    @extend_schema(
        summary="An instance with its events and cost so far",
        responses={200: InstanceDetailSerializer, 404: ERRORS[404]},
    )
    def retrieve(self, request, id=None):
        instance = self.get_object()
        return Response(InstanceDetailSerializer(instance).data)

    @extend_schema(
        summary="Launch an instance",
        request=InstanceCreateSerializer,
        responses={
            201: LaunchedInstanceSerializer,
            202: OpenApiResponse(
                WaitingLaunchSerializer, description="No card was free and it asked to wait: it waits in the queue."
            ),
            **ERRORS,
        },
    )
    def create(self, request):
        serializer = InstanceCreateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        context = acting(request)
        context.require(roles.OPERATE)
        fields = dict(serializer.validated_data)
        wait = fields.pop("wait_for_card")
        launched = waiting.launch_or_wait(
            context.account, launching.LaunchRequest(**fields), by=request.user, wait=wait
        )
        if isinstance(launched, WaitingLaunch):
            return waiting_response(launched, status.HTTP_202_ACCEPTED)
        instance = launched
        record(instance, request.user, TeamEvent.Action.LAUNCHED, subject=instance.name)
        return Response(LaunchedInstanceSerializer(instance).data, status=status.HTTP_201_CREATED)

    @extend_schema(
        summary="Start a stopped or preempted instance (relaunch)",
        request=InstanceStartSerializer,
        responses={202: InstanceSerializer, **ERRORS},
    )
    @action(detail=True, methods=["post"])
    def start(self, request, id=None):
        options = InstanceStartSerializer(data=request.data)
        options.is_valid(raise_exception=True)
        instance = self.get_object()
        lifecycle.start(instance, no_card=options.validated_data["no_card"], by=request.user)
        record(instance, request.user, TeamEvent.Action.STARTED, subject=instance.name)
        return Response(InstanceSerializer(instance).data, status=status.HTTP_202_ACCEPTED)

    @extend_schema(
        summary="Stop: checkpoint signal, grace period, stop; billing stops now",
        request=None,
        responses={202: InstanceSerializer, **ERRORS},
    )
    @action(detail=True, methods=["post"])
    def stop(self, request, id=None):
        instance = lifecycle.stop(self.get_object())
        record(instance, request.user, TeamEvent.Action.STOPPED, subject=instance.name)
        return Response(InstanceSerializer(instance).data, status=status.HTTP_202_ACCEPTED)

    @extend_schema(
        summary="Training curves: the scalars the workload logged (simulated on the simulated backend)",
        responses={200: TrainingCurvesSerializer, 404: ERRORS[404]},
    )
    @action(detail=True, methods=["get"])
    def training(self, request, id=None):
        return Response(costs.training_curves(self.get_object()))

    @extend_schema(
        summary="Logs: the last lines the start command wrote (stdout and stderr together)",
        description="JSON by default; with `Accept: text/plain`, the lines alone as UTF-8 text (bytes that are not "
        "UTF-8 show as U+FFFD). Errors are always JSON. Terminal colour codes are dropped, and of a line a progress "
        "bar redrew only its last state is kept. The simulated backend has no machine, so no logs.",
        parameters=[InstanceLogsQuerySerializer],
        responses={
            (200, "application/json"): InstanceLogsSerializer,
            (200, "text/plain"): OpenApiTypes.STR,
            **{(code, "application/json"): ERRORS[code] for code in (400, 404)},
            (503, "application/json"): LOGS_UNAVAILABLE,
        },
    )
    @action(detail=True, methods=["get"], renderer_classes=[renderers.JSONRenderer, PlainTextRenderer])
    def logs(self, request, id=None):
        query = InstanceLogsQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        instance = self.get_object()
        tail = logs.read_logs(instance, tail=query.validated_data["tail"])
        body = {"lines": tail.lines, "simulated": tail.simulated, "live": instance.is_live}
        return Response(InstanceLogsSerializer(body).data)

    def finalize_response(self, request, response, *args, **kwargs):
        # An error is JSON whatever the client accepts: {"code", "message"} is the API's one error shape.
        if response.status_code >= 400 and isinstance(getattr(request, "accepted_renderer", None), PlainTextRenderer):
            request.accepted_renderer, request.accepted_media_type = renderers.JSONRenderer(), "application/json"
        return super().finalize_response(request, response, *args, **kwargs)

    @extend_schema(
        summary="Release: deletes the system disk, never a data disk",
        request=None,
        responses={202: InstanceSerializer, **ERRORS},
    )
    @action(detail=True, methods=["post"])
    def release(self, request, id=None):
        instance = lifecycle.release(self.get_object())
        record(instance, request.user, TeamEvent.Action.RELEASED, subject=instance.name)
        return Response(InstanceSerializer(instance).data, status=status.HTTP_202_ACCEPTED)
