"""``/api/v1/instances/waiting``: launches waiting for a card (a launch with ``wait_for_card`` that found none free)
— the list of the context's, one with its place in the queue and the time it should start by, and cancel."""

from django.utils import timezone
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_field
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from core.api import strict
from core.api.errors import ErrorSerializer
from teams.context import acting

from .. import queue, waiting
from ..models import WaitingLaunch


class WaitingLaunchSerializer(strict.ModelSerializer):
    id = serializers.UUIDField(source="public_id", read_only=True)
    chip = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    instance = serializers.UUIDField(source="instance.public_id", read_only=True, allow_null=True, default=None)
    queue_position = serializers.SerializerMethodField(help_text="Place in the queue (1: next) while waiting.")
    queue_expected_by = serializers.SerializerMethodField(
        help_text="While waiting: the time by which the machines ahead of it must have freed its cards (their set "
        "ends); null when nothing bounds it."
    )

    class Meta:
        model = WaitingLaunch
        fields = [
            "id",
            "name",
            "chip",
            "family",
            "cards",
            "spot",
            "state",
            "detail",
            "instance",
            "queue_position",
            "queue_expected_by",
            "queued_at",
            "ended_at",
        ]
        read_only_fields = fields

    def _place(self, entry):
        return self.context.get("places", {}).get((queue.LAUNCH, entry.pk))

    def get_queue_position(self, entry) -> int | None:
        place = self._place(entry)
        return place.position if place else None

    @extend_schema_field(serializers.DateTimeField(allow_null=True))
    def get_queue_expected_by(self, entry):
        place = self._place(entry)
        return serializers.DateTimeField().to_representation(place.expected_by) if place and place.expected_by else None


def places(entries) -> dict:
    wanted = {(queue.LAUNCH, entry.pk) for entry in entries if entry.is_waiting}
    return queue.places(wanted, now=timezone.now())


def waiting_response(entry: WaitingLaunch, code=status.HTTP_200_OK) -> Response:
    return Response(WaitingLaunchSerializer(entry, context={"places": places([entry])}).data, status=code)


ERRORS = {
    403: OpenApiResponse(ErrorSerializer, description="Your role in the team may not launch or cancel."),
    404: OpenApiResponse(ErrorSerializer, description="No such waiting launch (or not yours)."),
    409: OpenApiResponse(ErrorSerializer, description="It no longer waits (it started, or left the queue)."),
}


class WaitingLaunchListView(APIView):
    team_scoped = True  # a team's token lists the team's waiting launches

    @extend_schema(
        tags=["instances"],
        summary="Launches waiting for a card (the last 100, newest first)",
        responses={200: WaitingLaunchSerializer(many=True)},
    )
    def get(self, request):
        entries = list(
            WaitingLaunch.objects.filter(owner=acting(request).account).select_related("chip", "instance")[:100]
        )
        return Response(WaitingLaunchSerializer(entries, many=True, context={"places": places(entries)}).data)


class WaitingLaunchView(APIView):
    team_scoped = True

    @extend_schema(
        tags=["instances"],
        summary="A launch waiting for a card: its place in the queue, when it should start, or the instance it became",
        responses={200: WaitingLaunchSerializer, 404: ERRORS[404]},
    )
    def get(self, request, id):
        return waiting_response(waiting.get_waiting(request.user, id, "view"))

    @extend_schema(
        tags=["instances"],
        summary="Cancel a launch waiting for a card (it leaves the queue)",
        request=None,
        responses={200: WaitingLaunchSerializer, **ERRORS},
    )
    def delete(self, request, id):
        entry = waiting.get_waiting(request.user, id, "change")
        return waiting_response(waiting.cancel(entry))
