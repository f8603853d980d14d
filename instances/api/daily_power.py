"""``/api/v1/instances/{id}/daily-power``: an instance's daily stop and start (定时开关机) — read it, set it, or
clear it (both times empty)."""

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from core.api import strict
from core.api.errors import ErrorSerializer
from core.api.schema import named_format
from core.time_zones import DEFAULT_TIMEZONE, TIMEZONE_FORMAT, TIMEZONE_RULES
from instances import daily_power, lifecycle

from ..models import DailyPowerSchedule


@named_format(TIMEZONE_FORMAT, TIMEZONE_RULES)
class TimeZoneField(serializers.CharField):
    """An IANA zone name (``core.time_zones.clean_timezone`` checks it)."""


class DailyPowerSerializer(strict.Serializer):
    stop_at = serializers.TimeField(
        allow_null=True, default=None, format="%H:%M", help_text="Stop the instance every day at this time (HH:MM)."
    )
    start_at = serializers.TimeField(
        allow_null=True, default=None, format="%H:%M", help_text="Start it every day at this time (HH:MM)."
    )
    timezone = TimeZoneField(max_length=64, default=DEFAULT_TIMEZONE)


ERRORS = {
    400: OpenApiResponse(ErrorSerializer, description="Bad input, with a message saying what to change."),
    403: OpenApiResponse(ErrorSerializer, description="Your role in the team may not change its instances."),
    404: OpenApiResponse(ErrorSerializer, description="No such instance (or not yours)."),
    409: OpenApiResponse(ErrorSerializer, description="The instance is released."),
}


class InstanceDailyPowerView(APIView):
    team_scoped = True  # the ownership filter keeps a team's token to the team's instances

    @extend_schema(
        tags=["instances"],
        summary="The instance's daily stop and start (empty times: off)",
        responses={200: DailyPowerSerializer, 404: ERRORS[404]},
    )
    def get(self, request, id):
        instance = lifecycle.get_instance(request.user, id, "view")
        saved = DailyPowerSchedule.objects.filter(instance=instance).first()
        return Response(DailyPowerSerializer(saved or {"stop_at": None, "start_at": None, "timezone": ""}).data)

    @extend_schema(
        tags=["instances"],
        summary="Set the daily stop and start (both times null: off); a time already past today acts from tomorrow",
        request=DailyPowerSerializer,
        responses={200: DailyPowerSerializer, **ERRORS},
    )
    def put(self, request, id):
        instance = lifecycle.get_instance(request.user, id, "change")
        body = DailyPowerSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        daily_power.set_daily(instance, data["stop_at"], data["start_at"], data["timezone"])
        return self.get(request, id)
