"""A spot job whose cards are reclaimed goes back to the queue and runs again on a new machine, without using up a
retry; its first machine is billed only up to the reclaim."""

from django.utils import timezone

from instances.backends import simulated
from instances.choices import Status
from jobs.choices import State
from jobs.exits import report_exit
from jobs.models import Job

from .conftest import drive
from .helpers import fresh


def test_a_reclaimed_spot_job_is_queued_again_and_runs_on_a_new_machine(submit, lifecycle):
    job = submit(backend="dcu", spot=True)
    drive()
    job = fresh(job)
    first = job.instance
    assert job.state == State.RUNNING and first.spot

    simulated.preempt(first, notice_seconds=0)
    drive()

    job = fresh(job)
    assert job.state == State.RUNNING and job.instance_id != first.pk and job.attempts == 1
    assert job.events.filter(new=State.QUEUED, detail="its spot cards were reclaimed: back in the queue").exists()
    first.refresh_from_db()
    assert first.status == Status.RELEASED
    (session,) = lifecycle.sessions_of(first)
    assert session.ended_at is not None


def test_a_reclaimed_on_demand_job_fails_as_before(submit, lifecycle):
    job = submit(backend="dcu")
    drive()
    simulated.preempt(fresh(job).instance, notice_seconds=0)
    drive()
    assert fresh(job).state == State.FAILED


def test_a_spot_job_whose_command_ended_before_the_reclaim_is_not_run_again(submit, lifecycle):
    job = submit(backend="dcu", spot=True)
    drive()
    first = fresh(job).instance
    report_exit(first, 0)  # the command ended; the beat has not seen it yet when the cards are reclaimed
    simulated.preempt(first, notice_seconds=0)
    drive()

    job = fresh(job)
    assert job.state == State.SUCCEEDED and job.instance_id == first.pk
    assert not job.events.filter(new=State.QUEUED).exclude(old="").exists()


def test_a_job_a_cluster_ended_at_its_time_limit_ends_now_not_at_the_consoles_later_deadline(submit, lifecycle):
    job = submit(backend="dcu", timeout_seconds=600)
    drive()
    job = fresh(job)
    assert job.state == State.RUNNING
    Job.objects.filter(pk=job.pk).update(cluster_job={"state": "TIMEOUT", "job_id": "7"})
    before = timezone.now()
    drive(rounds=1)

    job = fresh(job)
    assert job.state == State.TIMED_OUT
    assert before <= job.ended_at <= timezone.now()  # not the console's deadline, ten minutes on
    (session,) = lifecycle.sessions_of(job.instance)
    assert session.ended_at == job.ended_at
