"""The serializers of job schedules: a job's request as a submission takes it, plus its cron expression and zone."""

from rest_framework import serializers

from core.api import strict
from core.api.schema import named_format
from core.time_zones import DEFAULT_TIMEZONE, TIMEZONE_FORMAT, TIMEZONE_RULES

from ..models import JobSchedule, ScheduleRun
from ..schedules import CRON_FORMAT, CRON_RULES
from .serializers import JobCreateSerializer


@named_format(CRON_FORMAT, CRON_RULES)
class CronField(serializers.CharField):
    """A cron expression (``jobs.schedules.clean_cron`` checks it)."""


@named_format(TIMEZONE_FORMAT, TIMEZONE_RULES)
class TimeZoneField(serializers.CharField):
    """An IANA zone name (``core.time_zones.clean_timezone`` checks it)."""


class ScheduleCreateSerializer(JobCreateSerializer):
    """A job's request (as ``POST /api/v1/jobs/`` takes it) run on a cron schedule."""

    cron = CronField(max_length=100)
    timezone = TimeZoneField(max_length=64, default=DEFAULT_TIMEZONE)
    allow_overlap = serializers.BooleanField(
        default=False, help_text="Start a run even while the previous one is still going (otherwise it is skipped)."
    )


class ScheduleSerializer(strict.ModelSerializer):
    id = serializers.UUIDField(source="public_id", read_only=True)

    class Meta:
        model = JobSchedule
        fields = [
            "id",
            "name",
            "cron",
            "timezone",
            "suspended",
            "allow_overlap",
            "next_run_at",
            "image",
            "backend",
            "cards",
            "command",
            "timeout_seconds",
            "max_price_per_hour",
            "spot",
            "retries",
            "created_at",
        ]
        read_only_fields = fields


class ScheduleRunSerializer(strict.ModelSerializer):
    job = serializers.UUIDField(source="job.public_id", read_only=True, allow_null=True, default=None)

    class Meta:
        model = ScheduleRun
        fields = ["due_at", "outcome", "job", "detail", "at"]
        read_only_fields = fields
