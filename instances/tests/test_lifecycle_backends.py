"""One service-level lifecycle suite, run on every backend: the simulated data centre and a real Slurm cluster.

What the owner notices must not depend on the backend: states and their order, the cards held, when billing
starts and stops, the checkpoint before a stop, preemption and the one-click relaunch, a lost machine.
"""

from datetime import timedelta

import pytest
from django.utils import timezone

from catalog.models import Node
from core.errors import Conflict
from instances import lifecycle as instance_lifecycle
from instances.choices import Reason, Status
from instances.models import Instance


def fresh(instance):
    return Instance.objects.with_related().get(pk=instance.pk)


def moves(instance):
    return [(e.old, e.new) for e in instance.events.order_by("at", "id") if e.old != e.new]


def held_cards():
    return sum(Node.objects.values_list("cards_reserved", flat=True))


def test_a_launch_becomes_running_and_billing_starts_only_then(driver, launch, lifecycle):
    instance = launch(chip=driver.chip, cards=2)
    assert lifecycle.sessions_of(instance) == []

    driver.settle()

    instance = fresh(instance)
    assert instance.status == Status.RUNNING and instance.reserved_cards == 2
    assert moves(instance) == [("", "creating"), ("creating", "starting"), ("starting", "running")]
    [session] = lifecycle.sessions_of(instance)
    assert session.started_at == instance.running_since and session.ended_at is None
    assert instance.access["simulated"] is (driver.name == "simulated")


def test_stop_checkpoints_then_stops_billing_at_the_request_and_frees_the_cards(driver, launch, lifecycle):
    instance = launch(chip=driver.chip, cards=2)
    driver.settle()

    instance_lifecycle.stop(fresh(instance))
    asked = fresh(instance).stop_requested_at
    driver.settle()

    instance = fresh(instance)
    assert instance.status == Status.STOPPED and instance.reserved_cards == 0 and held_cards() == 0
    assert driver.checkpointed(instance)
    assert lifecycle.sessions_of(instance)[0].ended_at == asked
    assert instance.release_at == instance.stopped_at + timedelta(days=15)


def test_stop_start_release_round_trip(driver, launch, lifecycle):
    instance = launch(chip=driver.chip, cards=2)
    driver.settle()
    instance_lifecycle.stop(fresh(instance))
    driver.settle()
    instance_lifecycle.start(fresh(instance))
    driver.settle()

    instance = fresh(instance)
    assert instance.status == Status.RUNNING and len(lifecycle.sessions_of(instance)) == 2

    instance_lifecycle.release(fresh(instance))
    driver.settle()
    instance = fresh(instance)
    assert instance.status == Status.RELEASED and instance.reserved_cards == 0 and held_cards() == 0
    assert lifecycle.open_sessions() == []
    assert not driver.has_system_disk(instance)


def test_a_preempted_spot_instance_stops_billing_at_that_minute_and_relaunches_in_one_click(driver, launch, lifecycle):
    spot = launch(name="spot", chip=driver.chip, cards=8, spot=True)
    driver.settle()
    assert fresh(spot).status == Status.RUNNING

    before = timezone.now()
    driver.reclaim(fresh(spot))

    spot = fresh(spot)
    assert spot.status == Status.PREEMPTED and spot.status_reason == Reason.PREEMPTED
    assert driver.checkpointed(spot)
    [session] = lifecycle.sessions_of(spot)
    # Billing ends at the preemption (Slurm keeps whole seconds), not when the console noticed it.
    assert before - timedelta(seconds=1) <= session.ended_at <= timezone.now()
    assert session.ended_at == spot.stopped_at

    driver.ease_pressure()
    instance_lifecycle.start(fresh(spot))
    driver.settle()
    spot = fresh(spot)
    assert spot.status == Status.RUNNING and spot.reserved_cards == 8
    assert len(lifecycle.sessions_of(spot)) == 2


def test_arrears_stop_running_pay_as_you_go_instances_with_the_checkpoint(driver, launch, lifecycle, owner):
    instance = launch(chip=driver.chip, cards=1)
    driver.settle()

    assert instance_lifecycle.stop_for_arrears(owner.pk, "zero_balance") == 1
    driver.settle()

    instance = fresh(instance)
    assert instance.status == Status.STOPPED and instance.status_reason == Reason.STOPPED
    assert instance.events.filter(reason=Reason.ARREARS).exists() and driver.checkpointed(instance)
    assert lifecycle.open_sessions() == []


def test_a_machine_lost_under_a_running_instance_fails_it_and_frees_its_cards(driver, launch, lifecycle):
    instance = launch(chip=driver.chip, cards=2)
    driver.settle()

    driver.lose(fresh(instance))
    driver.settle(until=lambda: fresh(instance).status == Status.FAILED)

    instance = fresh(instance)
    assert instance.status == Status.FAILED and instance.reserved_cards == 0
    assert lifecycle.open_sessions() == []


def test_moves_the_state_does_not_allow_are_refused(driver, launch):
    instance = launch(chip=driver.chip, cards=1)
    driver.settle()
    with pytest.raises(Conflict) as refused:
        instance_lifecycle.start(fresh(instance))
    assert refused.value.status == 409
