"""Jobs on the real local Slurm cluster (``scripts/slurm-local.sh start``): the cluster's scheduler is the queue. A
job is an sbatch job submitted at once (the timeout as its time limit, ``requeue`` when spot, typed GRES), its state
and pending reason are on its page and in the API, it ends with its command's exit code, at its time limit, or when
cancelled, and a spot job whose cards are reclaimed goes back to the queue and to the cluster."""

import subprocess
import time
from datetime import timedelta

import pytest
from django.db.models import F

from billing import rules
from catalog.models import InstanceSpec, Node
from instances import launching, waiting
from instances import lifecycle as instance_lifecycle
from instances.backends import get_backend
from instances.backends.slurm import SlurmClient
from instances.choices import Status
from instances.models import AgentReport, Instance, InstanceEvent, WaitingLaunch
from jobs import running
from jobs.choices import FINISHED, State

from .helpers import fresh

pytestmark = [pytest.mark.slurm, pytest.mark.django_db(transaction=True)]

SLEEP = "sleep 600"


@pytest.fixture
def mlu_job(submit, on_slurm):
    """Submit a job on the cluster's MLU370 cards: ``mlu_job(command, cards=2, timeout_seconds=600, …)``."""

    def run(command, **fields):
        fields.setdefault("cards", 2)
        fields.setdefault("timeout_seconds", 600)
        return submit(backend="mlu", image="pytorch-2.2-neuware", command=command, **fields)

    return run


def beat() -> None:
    """What the worker runs: the jobs beat, then the instances' reconcile."""
    running.watch_active()
    running.place_queued()
    instance_lifecycle.reconcile()


def run_until(job, until, cluster, *, timeout: float = 90.0, message: str = "", step=beat):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        step()
        if until(fresh(job)):
            return fresh(job)
        time.sleep(0.3)
    job = fresh(job)
    raise AssertionError(f"waited for {message}: {job.state} {job.state_detail!r} {job.cluster_job}; {cluster.jobs()}")


def finished(job):
    return job.state in FINISHED


def slurm_job(cluster, job) -> dict:
    return cluster.job_of(fresh(job).instance)


def test_a_job_is_an_sbatch_job_at_once_and_succeeds_with_its_output_billed_its_started_minutes(
    mlu_job, on_slurm, lifecycle, owner_api
):
    job = mlu_job('echo "from slurm"; sleep 15; python3 -c "print(6*7)"', timeout_seconds=600)

    # Submitted to the cluster at once, not held in the console's queue: the timeout in minutes, two typed cards
    job = fresh(job)
    assert job.state == State.STARTING and job.instance is not None
    # (the worker's provisioning of its machine, without a jobs beat)
    on_slurm.settle(until=lambda: slurm_job(on_slurm, job) is not None, message="the sbatch job")
    submitted = slurm_job(on_slurm, job)
    assert submitted["time_limit"] == 10 and submitted["partition"] == "xinchuang"
    assert submitted["tres_per_node"] == "gres:gpu:mlu370:2"
    # with the spec's vCPUs and RAM, which a cluster that confines jobs gives it (not the partition's one CPU)
    spec = fresh(job).instance.spec
    assert (submitted["cpus"], submitted["memory_per_node"]) == (spec.vcpus, spec.memory_gb * 1024) == (24, 196608)

    job = run_until(job, finished, on_slurm, message="the job to end")
    assert (job.state, job.exit_code) == (State.SUCCEEDED, 0), job.state_detail
    assert job.cluster_job["job_id"] == str(submitted["job_id"])
    logs = owner_api.get(f"/api/v1/jobs/{job.public_id}/logs").json()
    assert "from slurm" in logs["lines"] and "42" in logs["lines"]

    on_slurm.settle(until=lambda: fresh(job).instance.status == Status.RELEASED, message="the machine to go")
    (session,) = lifecycle.sessions_of(job.instance)
    minutes = rules.billed_minutes(session.started_at, session.ended_at)
    # Billing begins when the console sees the machine running; the command runs long enough for that here
    assert minutes == 1 and session.charged == rules.minutes_cost(job.price_per_hour, minutes), session
    assert session.ended_at <= job.ended_at


def test_a_failing_command_fails_the_job_with_its_exit_code(mlu_job, on_slurm, owner_api):
    job = mlu_job("echo about to fail; exit 3", cards=1)

    job = run_until(job, finished, on_slurm, message="the job to fail")
    assert (job.state, job.exit_code) == (State.FAILED, 3)
    assert job.state_detail == "exited with status 3"
    assert owner_api.get(f"/api/v1/jobs/{job.public_id}").json()["exit_code"] == 3


def test_a_job_waits_in_slurms_queue_with_its_reason_shown_and_cancel_scancels(mlu_job, on_slurm, owner_api, english):
    # The cluster has 8 MLU370 cards: the first job takes them all
    first = mlu_job(SLEEP, cards=8, name="all-cards")
    run_until(first, lambda j: j.state == State.RUNNING, on_slurm, message="the first job to run")

    second = mlu_job(SLEEP, cards=2, name="waits")
    second = run_until(
        second,
        lambda j: j.cluster_job.get("reason") == "Resources" and "free" in j.state_detail,
        on_slurm,
        message="the pending reason",
    )
    assert second.state == State.STARTING and second.cluster_job["state"] == "PENDING"
    spec = InstanceSpec.objects.active().filter(chip__slug="mlu370-x8", cards=2).first()
    asked = f"waiting for a node with 2 free MLU370-X8 cards, {spec.vcpus} vCPUs and {spec.memory_gb} GB"
    assert second.state_detail == asked
    shown = owner_api.get(f"/api/v1/jobs/{second.public_id}").json()
    assert shown["cluster_job"] == {"job_id": second.cluster_job["job_id"], "state": "PENDING", "reason": "Resources"}
    page = english.get(second.get_absolute_url()).content.decode()
    assert f"Slurm job {second.cluster_job['job_id']}: PENDING (Resources)" in page
    assert asked in page

    # Cancelling the first: its sbatch job is cancelled, and the waiting one gets the cards
    assert owner_api.post(f"/api/v1/jobs/{fresh(first).public_id}/cancel").status_code == 202
    assert fresh(first).state == State.CANCELLED
    run_until(
        second,
        lambda j: j.state == State.RUNNING and slurm_job(on_slurm, first)["job_state"] == "CANCELLED",
        on_slurm,
        message="the cancelled job's cards to pass to the waiting one",
    )


def test_slurm_not_the_consoles_card_count_decides_when_a_job_runs(mlu_job, on_slurm):
    # The console counts every MLU370 card of the zone as taken (say, by machines of another console), but the
    # cluster has them free: the job is not held in the console's queue, it goes to Slurm and runs.
    nodes = Node.objects.filter(zone__slug="cn-east-xc", chip__slug="mlu370-x8")
    nodes.update(cards_reserved=F("cards"))
    job = fresh(mlu_job(SLEEP, cards=2))
    assert job.state == State.STARTING and job.instance.reserved_cards == 0

    run_until(job, lambda j: j.state == State.RUNNING, on_slurm, message="the job to run on Slurm's word")
    assert slurm_job(on_slurm, job)["job_state"] == "RUNNING"
    assert list(nodes.values_list("cards_reserved", flat=True)) == list(nodes.values_list("cards", flat=True))


def test_slurm_kills_a_job_at_its_time_limit_and_it_is_timed_out_billed_to_its_timeout(mlu_job, on_slurm, lifecycle):
    job = mlu_job(SLEEP, cards=1, timeout_seconds=60)
    job = run_until(job, lambda j: j.state == State.RUNNING, on_slurm, message="the job to run")
    assert slurm_job(on_slurm, job)["time_limit"] == 1

    # Only the instances' reconcile runs until Slurm itself ends the job at its time limit (up to ~30 s late)
    run_until(
        job,
        lambda j: slurm_job(on_slurm, j)["job_state"] == "TIMEOUT",
        on_slurm,
        timeout=150,
        message="Slurm's time limit",
        step=instance_lifecycle.reconcile,
    )
    job = run_until(job, finished, on_slurm, message="the job to be timed out")
    assert job.state == State.TIMED_OUT and job.cluster_job["state"] == "TIMEOUT"
    # Its bill ends at its timeout, or when the console saw Slurm kill it if that came first (Slurm's clock started
    # when the node started the job, before the console saw it running)
    timeout, killed = job.started_at + timedelta(seconds=60), slurm_job(on_slurm, job)["end_time"]
    assert min(killed, timeout.timestamp()) <= job.ended_at.timestamp() <= timeout.timestamp()
    # Billing ended when the machine did: at Slurm's kill, which its ~30 s timer may deliver late
    (session,) = lifecycle.sessions_of(job.instance)
    assert session.ended_at <= job.started_at + timedelta(seconds=95)


def test_a_reclaimed_spot_job_goes_back_to_the_queue_and_to_slurm(mlu_job, on_slurm, owner):
    job = mlu_job(SLEEP, cards=8, spot=True, name="spot")
    job = run_until(job, lambda j: j.state == State.RUNNING, on_slurm, message="the spot job to run")
    reclaimed = job.instance
    assert slurm_job(on_slurm, job)["partition"] == "spot" and slurm_job(on_slurm, job)["requeue"] is True

    # An on-demand machine needs two of the cluster's eight MLU370 cards: Slurm preempts the spot job
    pressure = launching.launch(
        owner, launching.LaunchRequest(name="on-demand", chip="mlu370-x8", cards=2, image="pytorch-2.2-neuware")
    )
    job = run_until(
        job,
        lambda j: j.instance_id != reclaimed.pk and j.state == State.STARTING,
        on_slurm,
        timeout=120,
        message="the reclaimed job to be queued and submitted again",
    )
    assert job.events.filter(new=State.QUEUED, detail="its spot cards were reclaimed: back in the queue").exists()
    assert job.attempts == 1
    job = run_until(job, lambda j: j.cluster_job.get("state") == "PENDING", on_slurm, message="its new sbatch job")

    # When the on-demand machine goes, the job runs again
    instance_lifecycle.release(Instance.objects.with_related().get(pk=pressure.pk))
    run_until(job, lambda j: j.state == State.RUNNING, on_slurm, timeout=180, message="the job to run again")


def test_a_preemption_mark_the_jobs_own_user_writes_in_its_comment_changes_nothing(mlu_job, on_slurm, lifecycle):
    # Given a spot job running on the cluster as its owner's account
    job = mlu_job(SLEEP, cards=1, spot=True, name="spot")
    job = run_until(job, lambda j: j.state == State.RUNNING, on_slurm, message="the job to run")
    instance = fresh(job).instance
    backend = get_backend("slurm")
    config = backend.config(instance)
    running = slurm_job(on_slurm, job)

    # When the owner's code marks its own job "preempted an hour ago" (what `scontrol update … comment=` does)
    forged = f"gpucloud:preempted@{running['start_time'] - 3600:.3f}"
    backend.client(config).update(running["job_id"], {"comment": forged})
    assert slurm_job(on_slurm, job)["comment"] == forged

    # Then the console neither ends its bill nor takes the job for a preempted one, nor submits the machine again
    for _ in range(3):
        beat()
    assert fresh(instance).status == Status.RUNNING and fresh(job).state == State.RUNNING
    assert backend.submit(fresh(instance)) == str(running["job_id"])
    assert [j["job_id"] for j in on_slurm.jobs()] == [running["job_id"]]
    (session,) = lifecycle.sessions_of(instance)
    assert session.ended_at is None


def test_a_job_its_own_user_renamed_is_still_the_machines_and_a_cancel_ends_it(mlu_job, on_slurm, owner_api):
    # Given a job running on the cluster as its owner's account, renamed by the owner's code (`scontrol update
    # jobid=… name=…`), so that the console's name for it finds nothing
    job = mlu_job(SLEEP, cards=1)
    job = run_until(job, lambda j: j.state == State.RUNNING, on_slurm, message="the job to run")
    instance = fresh(job).instance
    backend = get_backend("slurm")
    config = backend.config(instance)
    running = slurm_job(on_slurm, job)
    assert running["user_name"] == config["job_user"]
    as_account(config, "scontrol", "update", f"JobId={running['job_id']}", f"Name={on_slurm.prefix}elsewhere")
    assert slurm_job(on_slurm, job) is None  # nothing of its name left

    # Then the console still sees its machine running, and its cancel ends the job on the cluster
    for _ in range(3):
        beat()
    assert fresh(instance).status == Status.RUNNING and fresh(job).state == State.RUNNING
    assert owner_api.post(f"/api/v1/jobs/{job.public_id}/cancel").status_code == 202
    on_slurm.settle(until=lambda: fresh(instance).status == Status.RELEASED, message="the machine to go")
    renamed = [j for j in on_slurm.jobs() if j["job_id"] == running["job_id"]]
    assert renamed and renamed[0]["job_state"] == "CANCELLED", renamed


def as_account(config: dict, *argv: str) -> str:
    """Run a command as the instance's own account on the cluster, as its owner's code inside the machine can."""
    done = subprocess.run(
        ["runuser", "-u", config["job_user"], "--", *argv], capture_output=True, text=True, cwd="/tmp"
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def behind_a_holder(mlu_job, on_slurm, command: str, **fields):
    """A job running ``command`` submitted while another job holds all the cluster's MLU370 cards: it waits in
    Slurm's queue (the console's looks find it pending). Returns the holder, the job and its pending sbatch job."""
    holder = mlu_job(SLEEP, cards=8)
    on_slurm.settle(until=lambda: fresh(holder).instance.status == Status.RUNNING, message="the holder to run")
    job = mlu_job(command, **fields)
    on_slurm.settle(until=lambda: slurm_job(on_slurm, job) is not None, message="the sbatch job")
    pending = slurm_job(on_slurm, job)
    assert pending["job_state"] == "PENDING", pending
    return holder, job, pending


def test_a_spot_job_its_own_user_moves_to_the_on_demand_partition_is_ended_not_run_at_the_spot_price(
    mlu_job, on_slurm, lifecycle
):
    # Given a spot job waiting in Slurm's queue behind a holder of every MLU370 card
    _holder, job, pending = behind_a_holder(mlu_job, on_slurm, SLEEP, cards=1, spot=True, name="spot")
    assert pending["partition"] == "spot"

    # When its owner's code moves it to the on-demand partition, where no spot reclaim reaches it
    config = get_backend("slurm").config(fresh(job).instance)
    as_account(config, "scontrol", "update", f"JobId={pending['job_id']}", "Partition=xinchuang")
    assert slurm_job(on_slurm, job)["partition"] == "xinchuang"

    # Then the console cancels it on the cluster and the job fails saying why; nothing was billed
    job = run_until(job, finished, on_slurm, message="the console to end the changed job")
    assert job.state == State.FAILED
    assert "partition xinchuang" in job.state_detail, job.state_detail
    assert slurm_job(on_slurm, job)["job_state"] == "CANCELLED"
    assert InstanceEvent.objects.filter(instance=fresh(job).instance, reason="changed_outside").exists()
    assert lifecycle.sessions_of(fresh(job).instance) == []


def test_jobs_a_tenant_starts_on_the_cluster_by_itself_are_cancelled(mlu_job, on_slurm):
    # Given a job running on the cluster as its owner's account, and an earlier one of the owner's that ended
    done = mlu_job('echo "done"', cards=1, spot=True, name="ended")
    done = run_until(done, finished, on_slurm, message="the first job to end")
    on_slurm.settle(until=lambda: fresh(done).instance.status == Status.RELEASED, message="its machine to go")
    ended = slurm_job(on_slurm, done)
    job = mlu_job(SLEEP, cards=1)
    job = run_until(job, lambda j: j.state == State.RUNNING, on_slurm, message="the job to run")
    config = get_backend("slurm").config(fresh(job).instance)

    # When the owner's code, from inside its machine, submits a job of its own and requeues the ended one
    sbatch = ["sbatch", "--parsable", "-p", "xinchuang", "--gres=gpu:mlu370:2", "-o", "/dev/null"]
    own = as_account(config, *sbatch, f"--job-name={on_slurm.prefix}own", "--wrap", SLEEP).strip()
    as_account(config, "scontrol", "requeue", str(ended["job_id"]))
    listed = {str(j["job_id"]): j["job_state"] for j in on_slurm.jobs()}
    assert listed[own] in {"PENDING", "RUNNING"} and listed[str(ended["job_id"])] in {"PENDING", "RUNNING"}, listed

    # Then a beat of the console cancels both (a running job passes through COMPLETING), and its own machine keeps
    # running
    beat()
    deadline = time.monotonic() + 30
    while any(j["job_state"] == "COMPLETING" for j in on_slurm.jobs()) and time.monotonic() < deadline:
        time.sleep(0.5)
    listed = {str(j["job_id"]): j for j in on_slurm.jobs()}
    assert listed[own]["job_state"] == "CANCELLED", listed[own]
    assert listed[str(ended["job_id"])]["job_state"] == "CANCELLED", listed[str(ended["job_id"])]
    assert slurm_job(on_slurm, job)["job_state"] == "RUNNING" and fresh(job).state == State.RUNNING


def test_a_running_machine_whose_job_id_was_never_recorded_keeps_its_job_and_has_its_id_recorded(mlu_job, on_slurm):
    # Given a running job whose machine's job id the console lost (a worker gone between submitting and recording)
    job = mlu_job(SLEEP, cards=1)
    job = run_until(job, lambda j: j.state == State.RUNNING, on_slurm, message="the job to run")
    instance = fresh(job).instance
    recorded = instance.backend_job_id
    Instance.objects.filter(pk=instance.pk).update(backend_job_id="")

    # Then the console's beats neither take its job for a stranger's nor end the machine, and record its id again
    beat()
    beat()
    assert fresh(instance).backend_job_id == recorded
    assert slurm_job(on_slurm, job)["job_state"] == "RUNNING" and fresh(job).state == State.RUNNING


def ended_unseen(mlu_job, on_slurm, command: str, ended: str = "COMPLETED"):
    """A job running ``command`` that the cluster runs and ends between two looks of the console: submitted while
    another job holds all the cluster's MLU370 cards, it waits in Slurm's queue (so the console's look after
    submitting it finds it pending); then the holder ends on the cluster, and no beat runs until Slurm has ended it."""
    holder, job, _pending = behind_a_holder(mlu_job, on_slurm, command, cards=1)
    on_slurm.client.cancel(slurm_job(on_slurm, holder)["job_id"])
    deadline = time.monotonic() + 60
    while slurm_job(on_slurm, job)["job_state"] != ended and time.monotonic() < deadline:
        time.sleep(0.3)  # no beat meanwhile: the console does not look
    assert slurm_job(on_slurm, job)["job_state"] == ended, slurm_job(on_slurm, job)
    assert fresh(job).instance.status == Status.STARTING  # never seen running
    return job


def test_a_job_that_ends_before_the_console_sees_it_running_is_billed_its_started_minutes(mlu_job, on_slurm, lifecycle):
    job = ended_unseen(mlu_job, on_slurm, 'echo "quick"')

    job = run_until(job, finished, on_slurm, message="the console to see it ended")
    assert (job.state, job.exit_code) == (State.SUCCEEDED, 0), job.state_detail
    on_slurm.settle(until=lambda: fresh(job).instance.status == Status.RELEASED, message="the machine to go")
    ran = slurm_job(on_slurm, job)
    (session,) = lifecycle.sessions_of(job.instance)
    # Its minute on the cluster's cards is billed, from the cluster's start to its end (Slurm keeps whole seconds: a
    # command that took less than one ends in the second it started, and is counted to the next). A job Slurm started
    # in the very second the console asked for it begins when it was asked for, never before.
    assert ran["start_time"] <= session.started_at.timestamp() < ran["start_time"] + 1
    assert ran["start_time"] < session.ended_at.timestamp() <= max(ran["end_time"], ran["start_time"] + 1)
    minutes = rules.billed_minutes(session.started_at, session.ended_at)
    assert minutes == 1 and session.charged == rules.minutes_cost(job.price_per_hour, minutes), session


@pytest.fixture
def forgetting(monkeypatch):
    """Slurm forgetting ended jobs, as it does ``MinJobAge`` after their end (300 s on the local cluster, too long to
    wait for here): ``forget(job_id)`` takes the job out of every listing and lookup. ``forgetting.listed()`` is what
    the cluster really lists."""
    forgotten: set[str] = set()
    jobs, job = SlurmClient.jobs, SlurmClient.job
    monkeypatch.setattr(SlurmClient, "jobs", lambda self: [j for j in jobs(self) if str(j["job_id"]) not in forgotten])
    monkeypatch.setattr(SlurmClient, "job", lambda self, i: None if str(i) in forgotten else job(self, i))

    class Forgetting:
        forget = staticmethod(lambda job_id: forgotten.add(str(job_id)))

        @staticmethod
        def listed(cluster) -> list[dict]:
            return [j for j in jobs(cluster.client) if j.get("name", "").startswith(cluster.prefix)]

    return Forgetting


def test_a_job_slurm_forgot_before_the_console_looked_again_ends_billed_from_its_agents_reports(
    mlu_job, on_slurm, lifecycle, forgetting
):
    # Given a short job the cluster ran and ended while the console looked away, and then forgot
    job = ended_unseen(mlu_job, on_slurm, 'echo "quick"; exit 3', ended="FAILED")
    ran = slurm_job(on_slurm, job)
    forgetting.forget(ran["job_id"])

    # Then the console ends it with its command's exit code, from its agent's reports, and never submits it again
    job = run_until(job, finished, on_slurm, message="the console to see it ended")
    assert (job.state, job.exit_code) == (State.FAILED, 3), job.state_detail
    on_slurm.settle(until=lambda: fresh(job).instance.status == Status.RELEASED, message="the machine to go")
    mine = [j for j in forgetting.listed(on_slurm) if j["name"] == f"{on_slurm.prefix}{job.instance.public_id}"]
    assert [j["job_id"] for j in mine] == [ran["job_id"]]

    # And its started minute is billed, from its agent's first report to its last (the exit's)
    reports = AgentReport.objects.filter(instance=job.instance, job_id=str(ran["job_id"])).order_by("at")
    assert reports.filter(event=AgentReport.Event.EXITED).exists()
    (session,) = lifecycle.sessions_of(job.instance)
    assert session.started_at == reports.first().at
    assert session.ended_at == reports.last().at
    minutes = rules.billed_minutes(session.started_at, session.ended_at)
    assert minutes == 1 and session.charged == rules.minutes_cost(job.price_per_hour, minutes), session


def test_a_spot_job_reclaimed_before_the_console_saw_it_running_is_billed_its_minutes_and_queued_again(
    mlu_job, on_slurm, lifecycle
):
    # Given a spot job that Slurm starts while the console looks away (it waited behind a holder of every card)
    holder, job, spot = behind_a_holder(mlu_job, on_slurm, SLEEP, cards=8, spot=True, name="spot")
    on_slurm.client.cancel(slurm_job(on_slurm, holder)["job_id"])
    reports = AgentReport.objects.filter(instance=fresh(job).instance, job_id=str(spot["job_id"])).order_by("at")
    deadline = time.monotonic() + 60
    while not reports.exists() and time.monotonic() < deadline:
        time.sleep(0.3)  # no beat meanwhile: the console does not look
    assert reports.exists(), slurm_job(on_slurm, job)
    time.sleep(1.5)  # Slurm keeps whole seconds: the reclaim comes in a later second than the first report

    # And an on-demand job (not the console's) takes two of its cards before the console looks: Slurm requeues it
    pressure = {"name": f"{on_slurm.prefix}pressure", "partition": "xinchuang", "gres": "gpu:mlu370:2"}
    pressure |= {"current_working_directory": "/tmp", "standard_output": "/dev/null", "environment": {"PATH": "/bin"}}
    on_slurm.client.submit("#!/bin/bash\nexec sleep 600\n", pressure)

    def pending_again():
        found = slurm_job(on_slurm, job)
        return found if found["restart_cnt"] > 0 and found["job_state"] == "PENDING" else None

    deadline = time.monotonic() + 60
    while not pending_again() and time.monotonic() < deadline:
        time.sleep(0.1)
    requeued = pending_again()
    assert requeued, slurm_job(on_slurm, job)
    reclaimed = fresh(job).instance
    assert reclaimed.status == Status.STARTING  # never seen running

    # Then the console bills the minutes it ran, from its agent's first report to the reclaim, and the job goes back
    # to the queue (a machine submitted again to wait for cards), its reclaimed run not counted as an attempt
    job = run_until(
        job,
        lambda j: j.instance_id != reclaimed.pk and j.state == State.STARTING,
        on_slurm,
        message="the reclaimed job to be queued and submitted again",
    )
    assert job.events.filter(new=State.QUEUED, detail="its spot cards were reclaimed: back in the queue").exists()
    assert job.attempts == 1
    assert fresh(reclaimed).status in {Status.PREEMPTED, Status.RELEASING, Status.RELEASED}
    (session,) = lifecycle.sessions_of(reclaimed)
    assert session.started_at == reports.first().at
    assert session.ended_at.timestamp() == requeued["submit_time"]  # the requeued copy's: the reclaim's moment
    minutes = rules.billed_minutes(session.started_at, session.ended_at)
    assert minutes == 1 and session.charged == rules.minutes_cost(job.price_per_hour, minutes), session


def test_a_launch_waiting_for_a_card_on_the_cluster_is_submitted_there_when_one_frees(on_slurm, owner, lifecycle):
    # The console holds one 8-card MLU370 node here, as the cluster has 8 MLU370 cards: a machine takes them all
    nodes = Node.objects.filter(zone__slug="cn-east-xc", chip__slug="mlu370-x8").order_by("pk")
    nodes.exclude(pk=nodes[0].pk).update(drained=True)

    def request(name, cards):
        return launching.LaunchRequest(name=name, chip="mlu370-x8", cards=cards, image="pytorch-2.2-neuware")

    holder = launching.launch(owner, request("holder", 8))
    on_slurm.settle(until=lambda: fresh(holder).status == Status.RUNNING, message="the holder to run")

    # A launch that asks to wait for a card waits in the console's queue: nothing is sent to the cluster yet
    entry = waiting.launch_or_wait(owner, request("notebook", 2), wait=True)
    assert isinstance(entry, WaitingLaunch)
    beat()
    assert fresh(entry).state == WaitingLaunch.State.WAITING
    assert [job["name"] for job in on_slurm.jobs()] == [f"{on_slurm.prefix}{holder.public_id}"]

    # When the holder is released, the waiting launch starts: an sbatch job with its two typed cards, running
    instance_lifecycle.release(Instance.objects.with_related().get(pk=holder.pk))
    deadline = time.monotonic() + 90
    while fresh(entry).state == WaitingLaunch.State.WAITING and time.monotonic() < deadline:
        beat()
        time.sleep(0.3)
    entry = fresh(entry)
    assert entry.state == WaitingLaunch.State.STARTED, (entry.state, entry.detail, on_slurm.jobs())
    started = entry.instance
    on_slurm.settle(until=lambda: fresh(started).status == Status.RUNNING, message="its machine to run on the cluster")
    submitted = on_slurm.job_of(started)
    assert submitted["job_state"] == "RUNNING" and submitted["tres_per_node"] == "gres:gpu:mlu370:2"
    assert fresh(started).name == "notebook" and fresh(started).owner == owner
