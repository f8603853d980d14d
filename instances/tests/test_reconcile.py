"""Reconcile repairs drift: a lost task, a worker killed mid-provision, a backend that says otherwise."""

import os
import signal
from datetime import timedelta
from pathlib import Path

import pytest
import time_machine
from django.conf import settings
from django.utils import timezone

from accounts.models import WorkerHeartbeat
from catalog.models import Node
from instances import launching
from instances import lifecycle as instance_lifecycle
from instances.backends import BackendStatus, Phase
from instances.backends.simulated import SimulatedBackend
from instances.choices import Status
from instances.models import Instance, SimulatedJob
from instances.tests.fixtures import settle
from tests.fixtures.services import wait_until


def _purge_broker_queue() -> None:
    queue = Path(settings.DATA_DIR) / "broker" / "queue"
    for message in queue.glob("*") if queue.exists() else []:
        message.unlink(missing_ok=True)


def _consistent(instances, fake):
    for instance in instances:
        instance.refresh_from_db()
        assert instance.status == Status.RUNNING and instance.reserved_cards == instance.cards
        [session] = fake.sessions_of(instance)  # opened exactly once
        assert session.started_at == instance.running_since  # nothing for creating/starting
    for node in Node.objects.all():
        held = sum(Instance.objects.filter(node=node).values_list("reserved_cards", flat=True))
        assert node.cards_reserved == held


@pytest.mark.django_db(transaction=True)
def test_killing_the_worker_mid_provision_then_reconcile_leaves_everything_consistent(
    worker_process, lifecycle, owner, monkeypatch, settings
):
    # Given a real worker on the embedded broker, and images that take 5 s to pull
    settings.INSTANCES_SIM_PULL_SECONDS = None  # the worker and this process read the environment
    settings.INSTANCES_SIM_BOOT_SECONDS = None
    monkeypatch.setenv("INSTANCES_SIM_PULL_SECONDS", "5")
    monkeypatch.setenv("INSTANCES_SIM_BOOT_SECONDS", "0")
    _purge_broker_queue()
    worker = worker_process(name="doomed")
    wait_until(lambda: WorkerHeartbeat.objects.exists(), timeout=60, message="the worker to start")

    # When five launches are provisioning and the worker is killed (SIGKILL: no goodbye, tasks lost)
    request = launching.LaunchRequest(name="k", chip="ascend-910b", image="pytorch-2.2-cann8")
    launched = [launching.launch(owner, request) for _ in range(5)]
    wait_until(lambda: Instance.objects.filter(status=Status.STARTING).exists(), timeout=30, message="a submit")
    os.kill(worker.pid, signal.SIGKILL)
    worker.wait(timeout=10)
    assert not Instance.objects.filter(status=Status.RUNNING).exists()
    assert lifecycle.sessions == []

    # Then reconcile beats (15 s apart) repair every instance — those submitted before the kill and those whose
    # task never ran — and later beats change nothing
    with time_machine.travel(timezone.now(), tick=False) as clock:
        for _beat in range(2):
            clock.shift(timedelta(seconds=15))
            settle()
        _consistent(launched, lifecycle)
        clock.shift(timedelta(seconds=15))
        settle()
        _consistent(launched, lifecycle)
    _purge_broker_queue()


@pytest.mark.django_db
def test_a_lost_provision_task_is_repaired_by_reconcile(launch, lifecycle):
    instance = launch()  # on_commit never fires in this test: the task is "lost"
    assert Instance.objects.get(pk=instance.pk).status == Status.CREATING
    instance_lifecycle.reconcile()
    _consistent([instance], lifecycle)


@pytest.mark.django_db
def test_a_lost_stop_task_is_repaired_and_billing_ended_when_the_stop_was_asked(launch, lifecycle):
    with time_machine.travel(timezone.now(), tick=False) as clock:
        instance = launch()
        settle()
        clock.shift(timedelta(minutes=4))
        instance_lifecycle.stop(Instance.objects.with_related().get(pk=instance.pk))
        asked = timezone.now()
        clock.shift(timedelta(minutes=30))  # the stop task was lost; reconcile runs much later
        settle()
    instance.refresh_from_db()
    assert instance.status == Status.STOPPED and instance.reserved_cards == 0
    assert lifecycle.sessions_of(instance)[0].ended_at == asked


@pytest.mark.django_db
def test_a_backend_that_lost_a_running_machine_is_noticed(launch, lifecycle):
    instance = launch()
    settle()
    SimulatedJob.objects.all().delete()  # the backend restarted and forgot the job
    settle()
    instance.refresh_from_db()
    assert instance.status == Status.FAILED and instance.reserved_cards == 0
    assert lifecycle.open_sessions() == []


@pytest.mark.django_db
def test_duplicate_tasks_are_harmless(launch, lifecycle):
    instance = launch()
    for _ in range(3):
        instance_lifecycle.advance(instance.pk, "running")
    instance_lifecycle.advance(instance.pk, "stopped")  # a superseded task: wanted does not match, nothing happens
    instance.refresh_from_db()
    assert instance.status == Status.RUNNING and len(lifecycle.sessions_of(instance)) == 1
    assert instance.events.filter(new=Status.RUNNING).count() == 1


@pytest.mark.django_db
def test_a_starting_machine_whose_job_is_ending_is_looked_at_again_not_submitted_twice(launch, lifecycle, monkeypatch):
    # A cluster passes a job through an ending state (Slurm's COMPLETING, also on its way to requeue a spot job)
    instance = launch()
    instance_lifecycle.reconcile()  # submitted
    Instance.objects.filter(pk=instance.pk).update(status=Status.STARTING)
    submitted = []
    ending = BackendStatus(Phase.STOPPING, ready_in=1.0)
    monkeypatch.setattr(SimulatedBackend, "status_many", lambda self, found: {i.public_id: ending for i in found})
    monkeypatch.setattr(SimulatedBackend, "status", lambda self, i: ending)
    monkeypatch.setattr(SimulatedBackend, "submit", lambda self, i: submitted.append(i.public_id) or "again")
    instance_lifecycle.reconcile()
    assert submitted == []
    assert Instance.objects.get(pk=instance.pk).status == Status.STARTING
