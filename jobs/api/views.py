"""Job endpoints: submit, list (by state), detail, logs, cancel and rerun. A missing job and someone else's are
the same 404."""

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import mixins, renderers, status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from core.api.errors import ErrorSerializer
from instances.api.instances import PlainTextRenderer
from teams import roles
from teams.context import acting

from .. import services
from ..models import Job
from .serializers import (
    JobCreateSerializer,
    JobListQuerySerializer,
    JobLogsQuerySerializer,
    JobLogsSerializer,
    JobSerializer,
    SubmittedJobSerializer,
)

ERRORS = {
    400: OpenApiResponse(ErrorSerializer, description="Bad input, with a message saying what to change."),
    402: OpenApiResponse(ErrorSerializer, description="Not enough balance for the job's first hour."),
    404: OpenApiResponse(ErrorSerializer, description="No such job (or not yours)."),
    409: OpenApiResponse(ErrorSerializer, description="The job's state does not allow this action."),
}


@extend_schema(tags=["jobs"])
@extend_schema_view(
    list=extend_schema(summary="Your jobs, newest first", parameters=[JobListQuerySerializer]),
)
class JobViewSet(mixins.ListModelMixin, viewsets.GenericViewSet):
    serializer_class = JobSerializer
    team_scoped = True
    lookup_field = "public_id"
    lookup_url_kwarg = "id"
    lookup_value_regex = "[^/]+"

    def get_queryset(self):
        jobs = Job.objects.filter(owner=acting(self.request).account).with_related()
        query = JobListQuerySerializer(data=self.request.query_params)
        query.is_valid(raise_exception=True)
        if query.validated_data.get("state"):
            jobs = jobs.filter(state=query.validated_data["state"])
        return jobs

    def get_serializer_context(self):
        context = super().get_serializer_context()
        if self.action == "list":
            context["places"] = services.queue_places(self.get_queryset().filter(state="queued"))
        return context

    def get_object(self):
        action = "view" if self.request.method in ("GET", "HEAD") else "change"
        return services.get_job(self.request.user, self.kwargs["id"], action)

    def _one(self, job, code=status.HTTP_200_OK):
        return Response(JobSerializer(job, context={"places": services.queue_places([job])}).data, status=code)

    @extend_schema(summary="A job: its state, where it runs and why", responses={200: JobSerializer, 404: ERRORS[404]})
    def retrieve(self, request, id=None):
        return self._one(self.get_object())

    @extend_schema(
        summary="Submit a job", request=JobCreateSerializer, responses={201: SubmittedJobSerializer, **ERRORS}
    )
    def create(self, request):
        serializer = JobCreateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        context = acting(request)
        context.require(roles.OPERATE)
        job = services.submit(context.account, services.JobRequest(**serializer.validated_data), by=request.user)
        body = SubmittedJobSerializer(job, context={"places": services.queue_places([job])}).data
        return Response(body, status=status.HTTP_201_CREATED)

    @extend_schema(
        summary="Cancel: its machine is released now", request=None, responses={202: JobSerializer, **ERRORS}
    )
    @action(detail=True, methods=["post"])
    def cancel(self, request, id=None):
        return self._one(services.cancel(self.get_object()), status.HTTP_202_ACCEPTED)

    @extend_schema(
        summary="Run an ended job again, as a new job", request=None, responses={201: JobSerializer, **ERRORS}
    )
    @action(detail=True, methods=["post"])
    def rerun(self, request, id=None):
        return self._one(services.rerun(self.get_object(), by=request.user), status.HTTP_201_CREATED)

    @extend_schema(
        summary="Logs: the last lines the command wrote (stdout and stderr together)",
        parameters=[JobLogsQuerySerializer],
        responses={
            (200, "application/json"): JobLogsSerializer,
            (200, "text/plain"): OpenApiTypes.STR,
            (404, "application/json"): ERRORS[404],
            (503, "application/json"): OpenApiResponse(ErrorSerializer, description="The log cannot be read now."),
        },
    )
    @action(detail=True, methods=["get"], renderer_classes=[renderers.JSONRenderer, PlainTextRenderer])
    def logs(self, request, id=None):
        query = JobLogsQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        job = self.get_object()
        kept = services.job_log(job, tail=query.validated_data["tail"])
        body = {"lines": kept.lines, "simulated": kept.simulated, "live": job.is_live}
        return Response(JobLogsSerializer(body).data)

    def finalize_response(self, request, response, *args, **kwargs):
        if response.status_code >= 400 and isinstance(getattr(request, "accepted_renderer", None), PlainTextRenderer):
            request.accepted_renderer, request.accepted_media_type = renderers.JSONRenderer(), "application/json"
        return super().finalize_response(request, response, *args, **kwargs)
