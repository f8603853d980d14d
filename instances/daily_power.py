"""An instance's daily stop and start (定时开关机): set or clear the times, and the housekeeping step that acts on
them.

The rules: the times are read in the schedule's zone (Asia/Shanghai unless another is picked). Each acts once a
day, at the first beat at or after it; a time already past when the schedule is saved waits for its next day. The
stop stops a running instance (billing stops with it, the disks stay); the start starts a stopped one, through the
same funds and budget checks as the Start button, and a refusal is written on the instance's timeline. A beat that
was down acts once, for the latest time it missed (the state the user asked for now), not for each.
"""

import logging
import zoneinfo
from datetime import datetime, time, timedelta

from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from core.errors import Conflict, ServiceError
from core.field_errors import FieldError
from core.time_zones import clean_timezone

from . import lifecycle
from .choices import Reason, Status
from .models import DailyPowerSchedule, Instance
from .statemachine import note

logger = logging.getLogger(__name__)

FINISHED = (Status.RELEASING, Status.RELEASED)


def set_daily(instance: Instance, stop_at: time | None, start_at: time | None, zone: str = "") -> None:
    """Save the instance's daily times (both empty: no schedule). A time already past today acts from tomorrow."""
    if instance.status in FINISHED:
        raise Conflict(_("A released instance has no daily stop and start."))
    if stop_at is None and start_at is None:
        DailyPowerSchedule.objects.filter(instance=instance).delete()
        return
    zone = clean_timezone(zone)
    if stop_at is not None and stop_at == start_at:
        raise FieldError("start_at", _("The start and stop times must differ."), code="same_times")
    saved = DailyPowerSchedule(instance=instance, stop_at=stop_at, start_at=start_at, timezone=zone)
    latest = _latest_due(saved, timezone.now())
    DailyPowerSchedule.objects.update_or_create(
        instance=instance,
        defaults={
            "stop_at": stop_at,
            "start_at": start_at,
            "timezone": zone,
            "done_until": latest[1] if latest else None,
        },
    )


def _latest_due(schedule: DailyPowerSchedule, now: datetime) -> tuple[str, datetime] | None:
    """The latest of the schedule's times at or before ``now``: ("stop" or "start", when)."""
    tz = zoneinfo.ZoneInfo(schedule.timezone)
    today = now.astimezone(tz).date()
    found = []
    for name in ("stop", "start"):
        at = getattr(schedule, f"{name}_at")
        if at is None:
            continue
        when = datetime.combine(today, at, tzinfo=tz)
        if when > now:
            when = datetime.combine(today - timedelta(days=1), at, tzinfo=tz)
        found.append((when, name))
    if not found:
        return None
    when, name = max(found)
    return name, when


def apply_due(now: datetime | None = None) -> int:
    """The housekeeping step: stop and start the instances whose daily time has come. Returns how many acted."""
    now = now or timezone.now()
    acted = 0
    for schedule in DailyPowerSchedule.objects.select_related("instance", "instance__owner"):
        latest = _latest_due(schedule, now)
        if latest is None or (schedule.done_until is not None and latest[1] <= schedule.done_until):
            continue
        # The claim: only the beat that moves done_until on acts.
        claimed = DailyPowerSchedule.objects.filter(pk=schedule.pk, done_until=schedule.done_until)
        if claimed.update(done_until=latest[1]):
            acted += _act(schedule.instance, latest[0])
    return acted


def _act(instance: Instance, name: str) -> int:
    try:
        with transaction.atomic():
            if name == "stop" and instance.status == Status.RUNNING:
                lifecycle.stop(instance, reason=Reason.AUTO_SHUTDOWN_TIME, detail=_("daily stop"))
                return 1
            if name == "start" and instance.status == Status.STOPPED:
                lifecycle.start(instance)
                return 1
    except Conflict:
        return 0  # it moved meanwhile
    except ServiceError as exc:
        why = _("The daily start was refused: %(why)s") % {"why": exc.message}
        note(instance, Reason.START_REQUESTED, detail=why)
    return 0
