"""Job schedule endpoints: create, list, detail, runs, suspend, resume, delete. A missing schedule and someone
else's are the same 404; a team's read-only members see its schedules and change none."""

from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from core.api.errors import ErrorSerializer
from teams import roles
from teams.context import acting

from .. import schedules, services
from ..models import JobSchedule, ScheduleRun
from .schedule_serializers import ScheduleCreateSerializer, ScheduleRunSerializer, ScheduleSerializer

CREATE_FIELDS = {"cron", "timezone", "allow_overlap"}
ERRORS = {
    400: OpenApiResponse(ErrorSerializer, description="Bad input, with a message saying what to change."),
    403: OpenApiResponse(ErrorSerializer, description="Your role in the team may not change its schedules."),
    404: OpenApiResponse(ErrorSerializer, description="No such schedule (or not yours)."),
    409: OpenApiResponse(ErrorSerializer, description="Suspended already, or not suspended."),
}
RUNS_SHOWN = 50


@extend_schema(tags=["jobs"])
@extend_schema_view(list=extend_schema(summary="Your job schedules, newest first"))
class ScheduleViewSet(mixins.ListModelMixin, viewsets.GenericViewSet):
    serializer_class = ScheduleSerializer
    team_scoped = True
    lookup_field = "public_id"
    lookup_url_kwarg = "id"
    lookup_value_regex = "[^/]+"

    def get_queryset(self):
        return JobSchedule.objects.filter(owner=acting(self.request).account)

    def get_object(self):
        action = "view" if self.request.method in ("GET", "HEAD") else "change"
        return schedules.get_schedule(self.request.user, self.kwargs["id"], action)

    @extend_schema(summary="A job schedule", responses={200: ScheduleSerializer, 404: ERRORS[404]})
    def retrieve(self, request, id=None):
        return Response(ScheduleSerializer(self.get_object()).data)

    @extend_schema(
        summary="Run a job on a cron schedule (Asia/Shanghai unless another zone is given)",
        request=ScheduleCreateSerializer,
        responses={201: ScheduleSerializer, **ERRORS},
    )
    def create(self, request):
        serializer = ScheduleCreateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = dict(serializer.validated_data)
        timing = {name: data.pop(name) for name in CREATE_FIELDS}
        context = acting(request)
        context.require(roles.OPERATE)
        made = schedules.create(
            context.account,
            schedules.ScheduleRequest(job=services.JobRequest(**data), **timing),
            by=request.user,
        )
        return Response(ScheduleSerializer(made).data, status=status.HTTP_201_CREATED)

    @extend_schema(
        summary="What became of its last due times: a job submitted, skipped or refused",
        responses={200: ScheduleRunSerializer(many=True), 404: ERRORS[404]},
    )
    @action(detail=True, methods=["get"])
    def runs(self, request, id=None):
        rows = ScheduleRun.objects.filter(schedule=self.get_object()).select_related("job")[:RUNS_SHOWN]
        return Response(ScheduleRunSerializer(rows, many=True).data)

    @extend_schema(summary="Suspend: no run is due", request=None, responses={200: ScheduleSerializer, **ERRORS})
    @action(detail=True, methods=["post"])
    def suspend(self, request, id=None):
        return Response(ScheduleSerializer(schedules.suspend(self.get_object())).data)

    @extend_schema(
        summary="Resume: due again from now on (what was missed does not run)",
        request=None,
        responses={200: ScheduleSerializer, **ERRORS},
    )
    @action(detail=True, methods=["post"])
    def resume(self, request, id=None):
        return Response(ScheduleSerializer(schedules.resume(self.get_object())).data)

    @extend_schema(
        summary="Delete the schedule (the jobs it ran stay)", responses={204: None, 404: ERRORS[404], 403: ERRORS[403]}
    )
    def destroy(self, request, id=None):
        schedules.delete(self.get_object())
        return Response(status=status.HTTP_204_NO_CONTENT)
