"""A spot job whose cards are reclaimed goes back to the queue and runs again on a new machine, without using up a
retry; its first machine is billed only up to the reclaim."""

from instances.backends import simulated
from instances.choices import Status
from jobs.choices import State

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
