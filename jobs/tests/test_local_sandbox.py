"""A job end to end on the embedded default: a real sandbox on this host runs the command, its log is the job's,
the machine is released when the command exits, and the ledger charges the started minutes at the job's price."""

import time

import pytest

from billing import rules
from instances import lifecycle
from instances.choices import Status
from jobs import running
from jobs.choices import FINISHED, State

from .helpers import fresh

pytestmark = [pytest.mark.sandbox, pytest.mark.django_db(transaction=True)]


def run_until_finished(job, timeout: float = 90.0):
    """The jobs beat and the instances' reconcile, as the worker runs them, until the job has ended."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        running.watch_active()
        running.place_queued()
        lifecycle.reconcile()
        if fresh(job).state in FINISHED:
            return fresh(job)
        time.sleep(0.3)
    raise AssertionError(f"the job did not end: {fresh(job).state} {fresh(job).state_detail}")


def test_a_cpu_job_prints_42_succeeds_and_is_billed_its_started_minutes(on_local, submit, lifecycle, owner_api):
    job = submit(backend="cpu", image="ubuntu-22.04", command='python3 -c "print(6*7)"', name="answer")

    job = run_until_finished(job)
    assert (job.state, job.exit_code) == (State.SUCCEEDED, 0), job.state_detail
    logs = owner_api.get(f"/api/v1/jobs/{job.public_id}/logs").json()
    assert "42" in logs["lines"] and logs["live"] is False

    on_local.settle(until=lambda: fresh(job).instance.status == Status.RELEASED, message="the machine to go")
    (session,) = lifecycle.sessions_of(job.instance)
    assert session.per_hour == job.price_per_hour
    minutes = rules.billed_minutes(session.started_at, session.ended_at)
    assert minutes >= 1 and session.charged == rules.minutes_cost(job.price_per_hour, minutes)
    assert session.ended_at <= job.ended_at  # billing stopped when the command's exit was seen, not later
