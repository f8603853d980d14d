"""The serializers of job schedules: a job's request as a submission takes it, plus its cron expression and zone."""

from rest_framework import serializers

from core.api import strict

from ..models import JobSchedule, ScheduleRun
from ..schedules import DEFAULT_TIMEZONE
from .serializers import JobCreateSerializer


class ScheduleCreateSerializer(JobCreateSerializer):
    """A job's request (as ``POST /api/v1/jobs/`` takes it) run on a cron schedule."""

    cron = serializers.CharField(
        max_length=100, help_text="Five cron fields (“0 2 * * *”: 02:00 every day) or @hourly, @daily, @weekly…"
    )
    timezone = serializers.CharField(
        max_length=64, default=DEFAULT_TIMEZONE, help_text="The zone the expression is read in (IANA name)."
    )
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
