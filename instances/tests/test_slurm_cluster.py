"""Instances as real Slurm jobs on the local cluster (``scripts/slurm-local.sh start``): typed GRES cards, the
agent's heartbeat and card mapping, waiting for capacity in plain words, stop with the checkpoint signal, and a
controller restart under running instances."""

import json
import os
import subprocess
import threading
import time
from pathlib import Path

import pytest
from django import db
from django.conf import settings
from django.utils import translation

from catalog.models import Node
from instances import heartbeats as reports
from instances import lifecycle as instance_lifecycle
from instances.choices import Status
from instances.models import Instance

pytestmark = [pytest.mark.slurm, pytest.mark.django_db(transaction=True)]

SCRIPT = Path(settings.BASE_DIR) / "scripts" / "slurm-local.sh"
# Django sets TZ for this process; the restarted controller keeps the machine's own.
SCRIPT_ENV = {k: v for k, v in os.environ.items() if k != "TZ"}
RECORD_ENV = [
    "bash",
    "-c",
    'env > "$HOME/env.txt"; trap "echo usr1 >> $HOME/usr1.txt" USR1; while true; do sleep 1 & wait $!; done',
]


@pytest.fixture(autouse=True)
def english():
    # Reconcile writes the reasons in the active language; these tests read the English ones.
    with translation.override("en"):
        yield


def reconcile_in_thread():
    try:
        instance_lifecycle.reconcile()
    finally:
        db.connection.close()  # a thread's own connection would outlive the test database


def fresh(instance):
    return Instance.objects.with_related().get(pk=instance.pk)


def mlu(launch, cards, **fields):
    return launch(chip="mlu370-x8", cards=cards, image="pytorch-2.2-neuware", **fields)


def test_two_mlu370_cards_run_as_a_job_holding_exactly_those_cards_and_the_agent_reports(on_slurm, launch, settings):
    settings.SLURM = {**settings.SLURM, "workload": RECORD_ENV}
    instance = mlu(launch, 2)
    on_slurm.settle()

    instance = fresh(instance)
    job = on_slurm.job_of(instance)
    assert instance.status == Status.RUNNING and instance.backend_job_id == str(job["job_id"])
    assert job["job_state"] == "RUNNING" and job["partition"] == "xinchuang"
    assert job["tres_per_node"] == "gres:gpu:mlu370:2" and job["gres_detail"][0].startswith("gpu:mlu370:2(IDX:")
    assert instance.access["attach_command"] == f"srun --jobid {job['job_id']} --overlap --pty bash"

    # The agent's heartbeat is in the console, with host figures (no cnmon on this machine) labelled as such
    report = reports.latest(instance)
    assert report.job_id == str(job["job_id"]) and report.source == "host"
    # and the workload sees its two cards as MLU 0 and 1, not Slurm's global GRES numbers
    env_file = on_slurm.system_disk(instance) / "root" / "env.txt"
    on_slurm.settle(until=env_file.exists)
    env = dict(line.split("=", 1) for line in env_file.read_text().splitlines() if "=" in line)
    assert env["MLU_VISIBLE_DEVICES"] == "0,1" and "CUDA_VISIBLE_DEVICES" not in env
    assert (on_slurm.system_disk(instance) / "root" / "shared").is_symlink()


def test_a_launch_beyond_the_clusters_free_cards_says_why_it_waits(on_slurm, launch):
    # The catalog has two 8-card MLU370 nodes; the cluster behind them has 8 MLU370 cards in all.
    first = mlu(launch, 8, name="big")
    on_slurm.settle()
    waiting = mlu(launch, 2, name="small")
    on_slurm.settle(until=lambda: "2 free MLU370-X8 cards" in fresh(waiting).status_detail, message="the reason")

    waiting = fresh(waiting)
    spec = waiting.spec
    asked = f"waiting for a node with 2 free MLU370-X8 cards, {spec.vcpus} vCPUs and {spec.memory_gb} GB"
    assert waiting.status == Status.STARTING and waiting.status_detail == asked
    assert on_slurm.job_of(waiting)["state_reason"] == "Resources"

    instance_lifecycle.stop(fresh(first))
    on_slurm.settle()
    assert fresh(waiting).status == Status.RUNNING


def test_stop_sends_the_checkpoint_signal_then_cancels_after_the_grace(on_slurm, launch, settings):
    settings.INSTANCES_STOP_GRACE_SECONDS = 3
    settings.SLURM = {**settings.SLURM, "workload": RECORD_ENV}
    instance = mlu(launch, 1)
    on_slurm.settle()

    instance_lifecycle.stop(fresh(instance))
    instance_lifecycle.advance(instance.pk, "stopped")  # what the stop task does first

    # Within the grace: the marker is written, the workload got SIGUSR1, the job still runs
    home = on_slurm.system_disk(instance) / "root"
    deadline = time.monotonic() + 10
    while not (home / "usr1.txt").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert json.loads(on_slurm.marker(instance).read_text())["signal"] == "SIGUSR1"
    assert (home / "usr1.txt").read_text() == "usr1\n"
    assert on_slurm.job_of(instance)["job_state"] == "RUNNING" and fresh(instance).status == Status.STOPPING

    # After it: cancelled, stopped, the cards free in the console and in Slurm
    on_slurm.settle(timeout=30)
    instance = fresh(instance)
    assert instance.status == Status.STOPPED and instance.reserved_cards == 0
    assert on_slurm.job_of(instance)["job_state"] == "CANCELLED"
    assert json.loads(on_slurm.marker(instance).read_text())["signal"] == "SIGTERM"  # the cancel came after


def test_restarting_slurmctld_under_running_instances_leaves_every_instance_consistent(on_slurm, launch, lifecycle):
    instances = [mlu(launch, 2, name=f"run-{n}") for n in range(3)]
    on_slurm.settle()
    jobs = {i.pk: on_slurm.job_of(i)["job_id"] for i in instances}

    # While the controller is down, reconcile beats change nothing and raise nothing
    subprocess.run([SCRIPT, "stop-controller"], check=True, capture_output=True, env=SCRIPT_ENV)
    try:
        beats = threading.Thread(target=reconcile_in_thread)
        beats.start()
        beats.join(timeout=60)
        assert not beats.is_alive()
        assert {fresh(i).status for i in instances} == {Status.RUNNING}
    finally:
        subprocess.run([SCRIPT, "start-controller"], check=True, capture_output=True, env=SCRIPT_ENV)

    # After it, the same jobs still run, and reconcile keeps every instance, card and bill as it was
    on_slurm.settle()
    for instance in instances:
        instance = fresh(instance)
        assert instance.status == Status.RUNNING and instance.reserved_cards == 2
        assert on_slurm.job_of(instance)["job_id"] == jobs[instance.pk]
        [session] = lifecycle.sessions_of(instance)
        assert session.ended_at is None
    assert sum(Node.objects.values_list("cards_reserved", flat=True)) == 6
