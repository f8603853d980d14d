"""The quick-start training of a real machine of the local backend picks up where it left off: started again after
a stop, or after its machine died without a checkpoint signal, it resumes from its checkpoint, and its curve goes
on from there instead of from step 1."""

import os
import signal

import pytest

from instances import lifecycle
from instances.backends import get_backend, local
from instances.choices import Status
from instances.models import Instance

pytestmark = [pytest.mark.sandbox, pytest.mark.django_db(transaction=True)]


def fresh(instance):
    return Instance.objects.with_related().get(pk=instance.pk)


def steps(instance) -> list[int]:
    return [step for step, _value in get_backend("local").training_curves(fresh(instance)).get("loss", [])]


def resumed_at(on_local, instance) -> int:
    """The step the quick start says it resumes from, once it says so."""
    backend = get_backend("local")
    on_local.settle(
        until=lambda: "resuming from step" in backend.logs(fresh(instance)),
        timeout=30,
        message="the quick start to resume",
    )
    return int(backend.logs(fresh(instance)).rsplit("resuming from step ", 1)[1].split()[0])


def die(instance) -> None:
    """Every process of the machine killed outside the console, no checkpoint signal (the OOM killer, a crash)."""
    for child in local._children(local.read_state(instance.public_id)["pid"]):
        os.kill(child, signal.SIGKILL)


@pytest.mark.parametrize("how", ["stopped", "died"])
def test_a_restarted_quick_start_resumes_from_its_checkpoint(on_local, running, how):
    instance = running()
    on_local.settle(until=lambda: len(steps(instance)) >= 4, timeout=60, message="the quick-start curve")
    if how == "stopped":
        lifecycle.stop(fresh(instance))
        ended = Status.STOPPED
    else:
        die(fresh(instance))
        ended = Status.FAILED
    on_local.settle(until=lambda: fresh(instance).status == ended, message=f"the machine {how}")
    reached = max(steps(instance))

    lifecycle.start(fresh(instance))
    on_local.settle(until=lambda: fresh(instance).status == Status.RUNNING, message="the start")
    assert resumed_at(on_local, instance) >= reached - 1  # at most the step the kill cut short is done again
    on_local.settle(until=lambda: max(steps(instance)) > reached + 1, timeout=30, message="the curve to go on")
    assert min(step for step in steps(instance) if step > reached) == reached + 1
