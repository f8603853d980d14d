"""Housekeeping, once a minute: auto-shutdown (at a time, or when idle), daily stops and starts, prepaid terms
that end, and the countdown that releases instances stopped for too long (with reminders before)."""

import logging
from datetime import timedelta

from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from billing.models import Plan
from core.errors import Conflict

from . import charges, daily_power, lifecycle
from .choices import (
    RELEASE_REMINDER_DAYS,
    RESTING,
    Reason,
    Status,
    TermEnd,
)
from .models import Instance
from .statemachine import note

logger = logging.getLogger(__name__)


def housekeeping() -> dict:
    """The minute beat: auto-shutdown (at a time or when idle), prepaid terms that end, release reminders and the
    automatic release of instances stopped for ``STOPPED_RELEASE_DAYS`` (a setting). Each action is a guarded
    transition, so two overlapping beats act once."""
    return {
        "auto_shutdown": _auto_shutdown(),
        "daily": daily_power.apply_due(),
        "terms": _end_terms(),
        "reminders": _remind_release(),
        "released": _auto_release(),
    }


def _quietly(action, *args, **kwargs) -> bool:
    try:
        action(*args, **kwargs)
    except Conflict:
        return False
    return True


def _auto_shutdown() -> int:
    now = timezone.now()
    done = 0
    running = Instance.objects.with_related().select_related("owner").filter(status=Status.RUNNING)
    for instance in running.filter(auto_shutdown_at__lte=now):
        with transaction.atomic():  # the time is used up: a restart afterwards runs until stopped
            if _quietly(lifecycle.stop, instance, reason=Reason.AUTO_SHUTDOWN_TIME):
                Instance.objects.filter(pk=instance.pk).update(auto_shutdown_at=None)
                instance.auto_shutdown_at = None
                done += 1
    for instance in running.filter(idle_shutdown_minutes__isnull=False, running_since__isnull=False):
        minutes = instance.idle_shutdown_minutes
        if instance.running_since > now - timedelta(minutes=minutes):
            continue
        points = lifecycle._backend(instance).metrics(instance, minutes=minutes)
        if len(points) >= minutes and all(p.card_utilisation < instance.idle_threshold_percent for p in points):
            detail = _("below %(pct)s%% for %(minutes)s minutes") % {
                "pct": instance.idle_threshold_percent,
                "minutes": minutes,
            }
            done += _quietly(lifecycle.stop, instance, reason=Reason.AUTO_SHUTDOWN_IDLE, detail=detail)
    return done


def _end_terms() -> int:
    now = timezone.now()
    done = 0
    due = (
        Instance.objects.with_related()
        .select_related("owner")
        .filter(status=Status.RUNNING, plan__period_minutes__gt=1, term_ends_at__lte=now)
    )
    for instance in due:
        if instance.term_end_action == TermEnd.STOP:
            done += _quietly(lifecycle.stop, instance, reason=Reason.TERM_ENDED)
        else:
            done += _continue_payg(instance)
    return done


def _continue_payg(instance: Instance) -> int:
    payg = Plan.objects.filter(slug="payg").first()
    ended = instance.term_ends_at
    with transaction.atomic():
        # Compare-and-set on the term: two beats switch the plan (and open metering) once.
        if not Instance.objects.filter(pk=instance.pk, term_ends_at=ended, plan=instance.plan).update(
            plan=payg, term_ends_at=None
        ):
            return 0
        instance.plan, instance.term_ends_at = payg, None
        q = lifecycle.instance_quote(instance)
        Instance.objects.filter(pk=instance.pk).update(price_per_hour=q.payable_per_hour)
        charges.open_usage(instance, q, ended)
        note(instance, Reason.TERM_CONTINUED, at=ended, data={"payable_per_hour": str(q.payable_per_hour)})
    return 1


def _remind_release() -> int:
    """A reminder 3 days and 1 day before a stopped instance is released: an event on its timeline, and a
    notification on the owner's dashboard and by e-mail. A beat that missed the first sends only the latest."""
    now = timezone.now()
    sent = 0
    due_soon = Instance.objects.filter(
        status__in=[*RESTING],
        release_at__lte=now + timedelta(days=max(RELEASE_REMINDER_DAYS)),
        release_reminders_sent__lt=len(RELEASE_REMINDER_DAYS),
    ).select_related("owner")
    for instance in due_soon:
        left = instance.release_at - now
        due = sum(1 for days in RELEASE_REMINDER_DAYS if left <= timedelta(days=days))
        # Compare-and-set on the counter: one reminder per threshold, however many beats run.
        if due > instance.release_reminders_sent and Instance.objects.filter(
            pk=instance.pk, status__in=[*RESTING], release_at=instance.release_at, release_reminders_sent__lt=due
        ).update(release_reminders_sent=due):
            with transaction.atomic():
                note(instance, Reason.RELEASE_REMINDER, detail=instance.release_at.isoformat())
                date = timezone.localtime(instance.release_at).strftime("%Y-%m-%d %H:%M")
                charges.notify(instance, "release_reminder", date=date)
            sent += 1
    return sent


def _auto_release() -> int:
    due = Instance.objects.with_related().filter(status__in=[*RESTING], release_at__lte=timezone.now())
    return sum(_quietly(lifecycle.release, instance, reason=Reason.AUTO_RELEASE) for instance in due)
