"""Jobs on a cron schedule, with the clock held still: each run an ordinary job with its own machine and bill, no
overlap unless allowed (the skip recorded), missed runs run once, suspend and resume, and the zones' clocks."""

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
import time_machine
from django.utils import translation

from billing.models import Notification
from core.errors import Conflict
from core.field_errors import FieldError
from instances.choices import Status
from jobs import schedules
from jobs.choices import State
from jobs.exits import report_exit
from jobs.models import Job, JobSchedule, ScheduleRun
from jobs.schedules import ScheduleRequest
from jobs.services import JobRequest

from .conftest import drive
from .helpers import fresh

# 2026-03-02 01:00 in Shanghai (UTC+8, no daylight saving).
MONDAY_0100_SHANGHAI = datetime(2026, 3, 1, 17, 0, tzinfo=UTC)


@pytest.fixture
def schedule(owner, lifecycle):
    """Create a schedule for the owner (or ``user=``): ``schedule("0 2 * * *", tz="Europe/Berlin")``."""

    def make(cron="0 2 * * *", tz=schedules.DEFAULT_TIMEZONE, user=None, allow_overlap=False, **job):
        job.setdefault("backend", "dcu")
        request = JobRequest(name="nightly", image="pytorch-2.2-cuda12", command="python train.py", **job)
        made = ScheduleRequest(job=request, cron=cron, timezone=tz, allow_overlap=allow_overlap)
        return schedules.create(user or owner, made, by=owner)

    return make


def again(schedule):
    return JobSchedule.objects.get(pk=schedule.pk)


def at(when):
    return time_machine.travel(when, tick=False)


def beat():
    """The jobs beat as the worker runs it (schedules, placement, watching), and the instances' reconcile."""
    schedules.fire_due()
    drive()


def test_a_nightly_schedule_runs_at_2_in_shanghai_each_run_a_job_with_its_own_machine(schedule, lifecycle):
    with at(MONDAY_0100_SHANGHAI):
        nightly = schedule("0 2 * * *")
    assert nightly.timezone == "Asia/Shanghai"
    assert nightly.next_run_at == datetime(2026, 3, 1, 18, 0, tzinfo=UTC)  # 02:00 in Shanghai

    with at(MONDAY_0100_SHANGHAI + timedelta(minutes=59)):
        beat()
    assert not Job.objects.exists()  # not due yet

    with at(datetime(2026, 3, 1, 18, 0, 5, tzinfo=UTC)):
        beat()
        first = Job.objects.get()
        assert fresh(first).state == State.RUNNING
        report_exit(fresh(first).instance, 0)
        drive()
    with at(datetime(2026, 3, 2, 18, 0, 5, tzinfo=UTC)):
        beat()
    second = Job.objects.exclude(pk=first.pk).get()
    assert fresh(second).instance != fresh(first).instance  # its own machine, so its own logs and bill
    assert fresh(first).instance.status == Status.RELEASED
    (first_bill,) = lifecycle.sessions_of(fresh(first).instance)
    assert first_bill.ended_at == fresh(first).ended_at
    assert len(lifecycle.sessions_of(fresh(second).instance)) == 1
    runs = list(ScheduleRun.objects.order_by("due_at").values_list("outcome", "job"))
    assert runs == [("submitted", first.pk), ("submitted", second.pk)]


def test_a_run_never_overlaps_the_previous_one_and_the_skip_is_recorded(schedule):
    with at(MONDAY_0100_SHANGHAI):
        hourly = schedule("@hourly", timeout_seconds=4 * 3600)
    with at(MONDAY_0100_SHANGHAI + timedelta(hours=1)):
        beat()
    with at(MONDAY_0100_SHANGHAI + timedelta(hours=2)):
        beat()  # the first run's command is still going
    assert Job.objects.count() == 1
    skipped = ScheduleRun.objects.get(outcome="skipped")
    assert skipped.due_at == MONDAY_0100_SHANGHAI + timedelta(hours=2)
    assert "still running" in skipped.detail
    assert again(hourly).next_run_at == MONDAY_0100_SHANGHAI + timedelta(hours=3)


def test_an_overlapping_schedule_starts_a_run_while_the_previous_one_runs(schedule):
    with at(MONDAY_0100_SHANGHAI):
        schedule("@hourly", allow_overlap=True, timeout_seconds=4 * 3600)
    for hours in (1, 2):
        with at(MONDAY_0100_SHANGHAI + timedelta(hours=hours)):
            beat()
    assert Job.objects.filter(state=State.RUNNING).count() == 2


def test_runs_missed_while_the_beat_was_down_run_once_not_once_each(schedule):
    with at(MONDAY_0100_SHANGHAI):
        hourly = schedule("@hourly")
    # The beat was down for five hours and a half.
    with at(MONDAY_0100_SHANGHAI + timedelta(hours=5, minutes=30)):
        beat()
        beat()
    assert Job.objects.count() == 1
    assert ScheduleRun.objects.count() == 1
    assert again(hourly).next_run_at == MONDAY_0100_SHANGHAI + timedelta(hours=6)


def test_two_beats_at_once_submit_a_due_run_once(schedule):
    with at(MONDAY_0100_SHANGHAI):
        hourly = schedule("@hourly")
    due = hourly.next_run_at
    with at(due):
        schedules._fire(hourly.pk, due, due)
        schedules._fire(hourly.pk, due, due)  # a second beat that read the same due time
    assert Job.objects.count() == 1


def test_a_suspended_schedule_runs_nothing_and_resumes_from_now(schedule):
    with at(MONDAY_0100_SHANGHAI):
        hourly = schedule("@hourly")
        schedules.suspend(hourly)
        with pytest.raises(Conflict):
            schedules.suspend(hourly)
    with at(MONDAY_0100_SHANGHAI + timedelta(hours=3)):
        beat()
        assert not Job.objects.exists()
    with at(MONDAY_0100_SHANGHAI + timedelta(hours=3, minutes=10)):
        schedules.resume(hourly)
        beat()
    assert not Job.objects.exists()  # what was missed while suspended does not run
    assert again(hourly).next_run_at == MONDAY_0100_SHANGHAI + timedelta(hours=4)


def test_a_run_the_balance_cannot_pay_is_refused_and_recorded(schedule, owner, lifecycle):
    with at(MONDAY_0100_SHANGHAI):
        hourly = schedule("@hourly")
    lifecycle.balances[owner.pk] = Decimal("0")
    with at(MONDAY_0100_SHANGHAI + timedelta(hours=1)):
        beat()
    run = ScheduleRun.objects.get()
    assert run.outcome == "refused" and run.detail and run.job is None
    assert again(hourly).next_run_at == MONDAY_0100_SHANGHAI + timedelta(hours=2)  # the next one is still due


def test_runs_that_do_not_start_tell_the_owner_once_per_streak_in_the_owners_language(schedule, owner, lifecycle):
    owner.language = "zh-hans"
    owner.save(update_fields=["language"])
    with at(MONDAY_0100_SHANGHAI):
        hourly = schedule("@hourly")
    lifecycle.balances[owner.pk] = Decimal("0")
    for hour in (1, 2, 3):  # three refused runs in a row
        with at(MONDAY_0100_SHANGHAI + timedelta(hours=hour)):
            beat()
    missed = Notification.objects.filter(user=owner, kind="schedule_missed")
    assert missed.count() == 1
    with translation.override("zh-hans"):
        message = missed.get().message
    assert message.startswith("“nightly”的一次定时运行未启动") and "余额" in message  # in the owner's language
    assert "余额" in ScheduleRun.objects.filter(schedule=hourly).first().detail
    assert missed.get().params["path"] == hourly.get_absolute_url()

    lifecycle.balances[owner.pk] = Decimal("100")
    with at(MONDAY_0100_SHANGHAI + timedelta(hours=4)):
        beat()  # submitted
    lifecycle.balances[owner.pk] = Decimal("0")
    with at(MONDAY_0100_SHANGHAI + timedelta(hours=5)):
        beat()  # refused again, or skipped behind the run still going: a new streak either way
    assert missed.count() == 2


def test_new_york_9_30_follows_daylight_saving(schedule):
    # 09:30 in New York is 14:30 UTC in winter (EST) and 13:30 UTC from 8 March 2026 (EDT).
    with at(datetime(2026, 3, 6, 12, 0, tzinfo=UTC)):
        standup = schedule("30 9 * * *", tz="America/New_York")
    assert standup.next_run_at == datetime(2026, 3, 6, 14, 30, tzinfo=UTC)
    following = schedules.next_due(standup.cron, standup.timezone, datetime(2026, 3, 7, 15, 0, tzinfo=UTC))
    assert following == datetime(2026, 3, 8, 13, 30, tzinfo=UTC)


def test_clock_changes_neither_skip_nor_double_a_nightly_run():
    ny = "America/New_York"
    # 02:30 does not exist on 8 March 2026: the run is at 03:00 EDT, once.
    spring = schedules.next_due("30 2 * * *", ny, datetime(2026, 3, 7, 12, 0, tzinfo=UTC))
    assert spring == datetime(2026, 3, 8, 7, 0, tzinfo=UTC)
    # 01:30 happens twice on 1 November 2026: the run is at the first, and the next one is a day later.
    fall = schedules.next_due("30 1 * * *", ny, datetime(2026, 10, 31, 12, 0, tzinfo=UTC))
    assert fall == datetime(2026, 11, 1, 5, 30, tzinfo=UTC)
    after = schedules.next_due("30 1 * * *", ny, fall, previous=fall)
    assert after == datetime(2026, 11, 2, 6, 30, tzinfo=UTC)
    # Every hour keeps running every hour through the repeated one.
    hourly = schedules.next_due("@hourly", ny, datetime(2026, 11, 1, 5, 0, tzinfo=UTC), previous=None)
    assert hourly == datetime(2026, 11, 1, 6, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("cron", "tz", "field"),
    [
        ("0 2 * *", "Asia/Shanghai", "cron"),
        ("0 0 2 * * *", "Asia/Shanghai", "cron"),  # a seconds field: not cron
        ("every night", "Asia/Shanghai", "cron"),
        ("0 2 * * *", "Mars/Olympus", "timezone"),
    ],
)
def test_a_bad_expression_or_zone_is_refused_with_its_field(schedule, cron, tz, field):
    with pytest.raises(FieldError) as refused:
        schedule(cron, tz=tz)
    assert refused.value.field == field
