"""What an ended Slurm job the console never saw running means for billing: it ran from its start time when its
agent reported from it (to its end, at least into the second it started); a job cancelled while pending, or one no
agent reported from, did not run. A job Slurm has forgotten (``MinJobAge`` after its end) ran from its agent's first
report to its last, once the agent has exited or fallen silent."""

from datetime import UTC, datetime, timedelta

from instances.backends import Phase
from instances.backends.slurm import AgentRun, forgotten_job_phase, job_phase

START = 1_796_000_000
COMMON = {"wanted": "running", "grace": 10, "cards": 1, "chip": "MLU370", "spot_partition": "spot", "now": START + 3600}


def _at(epoch):
    return datetime.fromtimestamp(epoch, tz=UTC)


def _ended(**fields):
    return {"job_id": 7, "job_state": "COMPLETED", "start_time": START, "end_time": START + 30, **fields}


def test_a_job_its_agent_reported_from_ran_from_its_start_to_its_end():
    status = job_phase(_ended(), reported=True, **COMMON)
    assert status.phase == Phase.FAILED and status.ran_from == _at(START) and status.since == _at(START + 30)


def test_one_that_ended_in_the_second_it_started_ran_into_that_second():
    status = job_phase(_ended(end_time=START), reported=True, **COMMON)
    assert status.ran_from == _at(START) and status.since == _at(START + 1)


def test_a_job_no_agent_reported_from_did_not_run_even_where_no_report_is_required():
    # Cancelled while pending: Slurm gives it a start time equal to its end
    cancelled = _ended(job_state="CANCELLED", end_time=START)
    assert job_phase(cancelled, reported=True, agent_reported=False, **COMMON).ran_from is None
    assert job_phase(_ended(), reported=False, **COMMON).ran_from is None


def test_a_stopped_one_ran_too():
    status = job_phase(_ended(), reported=True, **(COMMON | {"wanted": "stopped"}))
    assert status.phase == Phase.STOPPED and status.ran_from == _at(START)


def _forgotten(run, wanted="running", now=START + 3600):
    return forgotten_job_phase(run, wanted=wanted, stale_after=45, now=_at(now))


def test_a_forgotten_job_whose_agent_reported_its_exit_ran_from_the_first_report_to_the_exit():
    status = _forgotten(AgentRun(_at(START), _at(START + 30), exited=True))
    assert status.phase == Phase.FAILED and status.ran_from == _at(START) and status.since == _at(START + 30)
    assert _forgotten(AgentRun(_at(START), _at(START + 30), exited=True), wanted="stopped").phase == Phase.STOPPED


def test_a_forgotten_job_whose_agent_fell_silent_ran_to_its_last_heartbeat():
    run = AgentRun(_at(START), _at(START + 600), exited=False)
    status = _forgotten(run, now=START + 600 + 46)
    assert status.phase == Phase.FAILED and (status.ran_from, status.since) == (_at(START), _at(START + 600))


def test_a_job_slurm_does_not_list_while_its_agent_still_reports_is_left_as_it_is():
    # Neither ended (its minutes would stop while it runs) nor absent (its start would be submitted a second time)
    run = AgentRun(_at(START), _at(START + 600), exited=False)
    status = _forgotten(run, now=START + 600 + 30)
    assert status.phase == Phase.BOOTING and status.ran_from is None


def test_a_forgotten_job_never_ends_in_the_future():
    run = AgentRun(_at(START), _at(START + 60) + timedelta(seconds=5), exited=True)
    assert _forgotten(run, now=START + 60).since == _at(START + 60)


def test_a_forgotten_job_of_a_machine_being_stopped_stops_at_its_last_report_whatever_comes_after():
    run = AgentRun(_at(START), _at(START + 600), exited=False)
    status = _forgotten(run, wanted="stopped", now=START + 600 + 30)
    assert status.phase == Phase.STOPPED and (status.ran_from, status.since) == (_at(START), _at(START + 600))
