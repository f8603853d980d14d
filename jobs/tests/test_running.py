"""A job's life on the simulated data centre: placed on a machine, watched, and its machine released when the
command ends or its timeout hits; billed to the started minute."""

from datetime import timedelta
from decimal import Decimal

import pytest
import time_machine
from django.db import connection
from django.db.models import F
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from billing.models import Notification
from catalog.models import Node
from core.errors import Conflict, NotFound, PaymentRequired
from instances import lifecycle as instance_lifecycle
from instances.choices import Status
from jobs import running, services
from jobs.choices import State
from jobs.exits import report_exit
from jobs.models import Job

from .conftest import drive
from .helpers import fresh


def test_a_job_runs_its_command_and_its_machine_is_released_when_it_exits(submit, owner, lifecycle):
    job = submit(backend="dcu", command="python train.py")
    assert job.state == State.QUEUED

    drive()
    job = fresh(job)
    assert job.state == State.RUNNING
    assert job.instance.status == Status.RUNNING and job.instance.start_command.endswith("\npython train.py")
    assert job.instance.image == "pytorch-2.2-dtk24"  # the dcu variant of the multi-arch image

    report_exit(job.instance, 0)
    drive()
    job = fresh(job)
    assert job.state == State.SUCCEEDED and job.exit_code == 0
    assert job.instance.status == Status.RELEASED
    assert [s.ended_at for s in lifecycle.sessions_of(job.instance)] == [job.ended_at]  # billing ends with the job
    kinds = list(Notification.objects.filter(user=owner).values_list("kind", flat=True))
    assert sorted(kinds) == ["job_started", "job_succeeded"]


def test_a_failing_command_fails_the_job_with_its_exit_code(submit, lifecycle):
    job = submit(backend="dcu")
    drive()
    report_exit(fresh(job).instance, 3)
    drive()
    job = fresh(job)
    assert (job.state, job.exit_code) == (State.FAILED, 3)
    assert job.instance.status == Status.RELEASED


def test_a_failed_job_with_retries_left_runs_again_on_a_new_machine(submit, lifecycle):
    job = submit(backend="dcu", retries=1)
    drive()
    first = fresh(job).instance
    report_exit(first, 1)
    drive()
    job = fresh(job)
    assert job.state == State.RUNNING and job.attempts == 2
    first.refresh_from_db()
    assert job.instance != first and first.status == Status.RELEASED

    report_exit(job.instance, 1)
    drive()
    job = fresh(job)
    assert (job.state, job.attempts) == (State.FAILED, 2)  # no retries left


def test_a_job_past_its_timeout_is_stopped_and_billed_only_up_to_it(submit, lifecycle):
    job = submit(backend="dcu", timeout_seconds=120)
    drive()
    job = fresh(job)
    started = job.started_at
    # The beat notices 5 minutes late: the bill still ends at the timeout, two minutes after the start.
    with time_machine.travel(started + timedelta(minutes=7), tick=False):
        drive()
    job = fresh(job)
    assert job.state == State.TIMED_OUT
    assert job.instance.status == Status.RELEASED
    (session,) = lifecycle.sessions_of(job.instance)
    assert session.ended_at == started + timedelta(seconds=120)
    assert session.charged == (job.price_per_hour * 2 / 60).quantize(Decimal("0.01"))


def test_a_job_whose_command_ends_after_its_timeout_is_billed_only_up_to_it(submit, lifecycle):
    job = submit(backend="dcu", timeout_seconds=120)
    drive()
    job = fresh(job)
    started = job.started_at
    # The command ends 20 s past the timeout and the beat sees it 40 s later still: never more than the timeout.
    with time_machine.travel(started + timedelta(seconds=140), tick=False):
        report_exit(job.instance, 0)
    with time_machine.travel(started + timedelta(seconds=180), tick=False):
        drive()
    job = fresh(job)
    assert job.state == State.SUCCEEDED and job.ended_at == started + timedelta(seconds=120)
    (session,) = lifecycle.sessions_of(job.instance)
    assert session.ended_at == started + timedelta(seconds=120)
    assert session.charged == (job.price_per_hour * 2 / 60).quantize(Decimal("0.01"))


def test_a_command_that_ends_in_time_is_billed_to_its_end_not_to_when_the_beat_saw_it(submit, lifecycle):
    job = submit(backend="dcu", timeout_seconds=3600)
    drive()
    job = fresh(job)
    started = job.started_at
    with time_machine.travel(started + timedelta(seconds=61), tick=False):
        report_exit(job.instance, 0)
    with time_machine.travel(started + timedelta(minutes=10), tick=False):
        drive()
    (session,) = lifecycle.sessions_of(fresh(job).instance)
    assert session.ended_at == started + timedelta(seconds=61)  # two started minutes, not ten


def test_cancelling_a_running_job_releases_its_machine(submit, lifecycle):
    job = submit(backend="dcu")
    drive()
    services.cancel(fresh(job))
    drive()
    job = fresh(job)
    assert job.state == State.CANCELLED and job.instance.status == Status.RELEASED
    with pytest.raises(Conflict):
        services.cancel(job)


def test_a_queued_job_waits_for_a_card_and_starts_when_one_frees(submit, lifecycle, owner, stranger):
    # One free DCU card in the whole data centre.
    Node.objects.filter(chip__slug="dcu-z100").exclude(name="xc-dcu-01").update(drained=True)
    Node.objects.filter(name="xc-dcu-01").update(cards=1)
    first = submit(backend="dcu", name="first")
    drive()
    second = submit(user=stranger, backend="dcu", name="second")
    drive()
    assert fresh(first).state == State.RUNNING
    second = fresh(second)
    assert second.state == State.QUEUED and "Waiting for a card" in second.state_detail
    assert services.queue_positions([second]) == {second.pk: 1}

    report_exit(fresh(first).instance, 0)
    drive()
    assert fresh(first).state == State.SUCCEEDED
    assert fresh(second).state == State.RUNNING


def test_the_queue_is_fair_across_accounts(submit, lifecycle, owner, stranger):
    Node.objects.filter(chip__slug="dcu-z100").update(cards_reserved=F("cards"))  # every DCU card is taken
    mine = [submit(backend="dcu", name=f"mine-{i}") for i in range(3)]
    theirs = submit(user=stranger, backend="dcu", name="theirs")
    drive(rounds=1)
    order = services.queue_positions([*mine, theirs])
    # The stranger's one job comes before the owner's second: no account's backlog holds up another's.
    assert [order[j.pk] for j in [mine[0], theirs, mine[1], mine[2]]] == [1, 2, 3, 4]


def test_a_long_queue_for_taken_cards_costs_a_placement_pass_one_try(submit, lifecycle, owner, stranger):

    Node.objects.filter(chip__slug="dcu-z100").update(cards_reserved=F("cards"))  # every DCU card is taken

    def pass_queries(jobs: int) -> int:
        for i in range(jobs):
            submit(user=[owner, stranger][i % 2], backend="dcu", name=f"wait-{i}")
        with CaptureQueriesContext(connection) as seen:
            assert running.place_queued() == 0
        return len(seen.captured_queries)

    few = pass_queries(4)
    many = pass_queries(20)  # 24 queued now, half of them each account's
    # One try for the kind of card, not one per queued job (a try is a whole launch refused: dozens of queries);
    # the jobs not tried have their balance checked once per account and request, not once per job.
    assert many <= few + 5
    assert Job.objects.filter(state=State.QUEUED).count() == 24


def test_a_smaller_job_still_starts_after_a_bigger_one_found_no_room(submit, lifecycle, owner, stranger):
    # One DCU node with two free cards: the owner's 4-card job waits, the stranger's 1-card job behind it starts.
    Node.objects.filter(chip__slug="dcu-z100").exclude(name="xc-dcu-01").update(drained=True)
    Node.objects.filter(name="xc-dcu-01").update(cards_reserved=F("cards") - 2)
    big = submit(backend="dcu", cards=4, name="big")
    small = submit(user=stranger, backend="dcu", cards=1, name="small")
    drive(rounds=1)
    assert fresh(big).state == State.QUEUED
    assert fresh(small).state in (State.STARTING, State.RUNNING)


def test_a_job_that_cannot_pay_its_first_hour_is_refused(submit, lifecycle, owner):

    lifecycle.balances[owner.pk] = Decimal("0.50")
    with pytest.raises(PaymentRequired):
        submit(backend="dcu")


def test_someone_elses_job_is_not_found(submit, stranger):
    job = submit(backend="dcu")
    with pytest.raises(NotFound):
        services.get_job(stranger, job.public_id)
    with pytest.raises(NotFound):
        services.get_job(stranger, "not-a-uuid")
    assert services.get_job(job.owner, job.public_id) == job


def test_a_reclaimed_spot_job_goes_back_to_the_queue_and_runs_again_without_using_a_retry(submit, lifecycle, owner):

    job = submit(backend="dcu", spot=True, retries=0, command="python train.py --resume")
    drive()
    job = fresh(job)
    assert job.state == State.RUNNING
    first = job.instance
    instance_lifecycle.preempt(first, detail="an on-demand launch took the cards")
    running_until_reclaim = lifecycle.sessions_of(first)

    drive()
    job = fresh(job)
    assert job.state == State.RUNNING and job.instance_id != first.pk  # placed again, on a new machine
    assert job.attempts == 1 and job.instance.start_command.endswith("\npython train.py --resume")
    first.refresh_from_db()
    assert first.status == Status.RELEASED
    assert [s.ended_at for s in running_until_reclaim] == [first.stopped_at]  # billing ended at the reclaim
    events = list(job.events.order_by("at", "pk").values_list("new", flat=True))
    assert events.count(State.QUEUED) == 2 and events.count(State.RUNNING) == 2

    report_exit(job.instance, 0)
    drive()
    assert fresh(job).state == State.SUCCEEDED


def test_a_rerun_is_a_new_job_with_the_same_request(submit, lifecycle):
    job = submit(backend="dcu", command="echo hi")
    drive()
    report_exit(fresh(job).instance, 0)
    drive()
    again = services.rerun(fresh(job))
    assert again.pk != job.pk and again.command == "echo hi" and again.state == State.QUEUED


def test_queued_jobs_do_not_start_before_the_clock_moves(submit):
    # The submission alone launches nothing: placement is the beat's (or the task's after commit).
    job = submit(backend="dcu")
    assert fresh(job).instance is None and timezone.now() >= job.queued_at


def test_what_the_beat_writes_on_a_job_is_in_the_language_its_submitter_chose(submit, owner, lifecycle):
    owner.language = "zh-hans"  # the beat runs in no request of theirs
    owner.save(update_fields=["language"])
    Node.objects.filter(chip__slug="dcu-z100").update(cards_reserved=F("cards"))  # every DCU card taken
    job = submit(backend="dcu")
    drive(rounds=1)
    job.refresh_from_db()
    assert job.state == State.QUEUED and job.state_detail.startswith("正在等待空闲的卡"), job.state_detail
