"""The state machine, driven as the worker and the reconcile beat drive it, with the money side faked."""

from datetime import timedelta
from decimal import Decimal

import pytest
import time_machine
from django.db import OperationalError
from django.utils import timezone

from billing import quote as quoting
from catalog.models import Chip, Node
from core.errors import Conflict, PaymentRequired, ServiceError
from instances import charges as instances_charges
from instances import lifecycle as instance_lifecycle
from instances.backends import simulated
from instances.choices import Reason, Status
from instances.models import Instance
from instances.tests.fixtures import settle

pytestmark = pytest.mark.django_db


def fresh(instance):
    return Instance.objects.with_related().get(pk=instance.pk)


def statuses(instance):
    return [(e.old, e.new) for e in instance.events.order_by("at", "id") if e.old != e.new]


def test_a_launch_reserves_cards_and_becomes_running_through_starting(launch, lifecycle):
    instance = launch(chip="ascend-910b", cards=2)
    assert instance.status == Status.CREATING and instance.reserved_cards == 2
    assert instance.node.zone.slug == "cn-east-xc"  # the Xinchuang zone first
    assert Node.objects.get(pk=instance.node_id).cards_reserved == 2

    settle()

    instance.refresh_from_db()
    assert instance.status == Status.RUNNING
    assert statuses(instance) == [("", "creating"), ("creating", "starting"), ("starting", "running")]
    assert instance.access["simulated"] is True and "ssh_command" not in instance.access
    assert instance.price_per_hour == lifecycle.sessions_of(instance)[0].per_hour


def test_metering_starts_when_running_and_stops_when_the_stop_is_asked(launch, lifecycle):
    start = timezone.now()
    with time_machine.travel(start, tick=False) as clock:
        instance = launch()
        clock.shift(timedelta(minutes=3))  # three minutes of creating/starting are free
        assert lifecycle.sessions_of(instance) == []
        settle()
        instance.refresh_from_db()
        [session] = lifecycle.sessions_of(instance)
        assert session.started_at == instance.running_since == start + timedelta(minutes=3)

        clock.shift(timedelta(minutes=10, seconds=5))
        instance_lifecycle.stop(fresh(instance))
        asked = timezone.now()
        clock.shift(timedelta(minutes=5))  # the grace period and the stop are not charged
        settle()

    instance.refresh_from_db()
    assert instance.status == Status.STOPPED and instance.reserved_cards == 0
    assert session.ended_at == asked
    # 10 min 5 s is 11 started minutes of one 910B card at the subsidised ¥1.71/h: ¥0.3135 → ¥0.31
    assert session.per_hour == Decimal("1.71") and lifecycle.charged(instance) == Decimal("0.31")
    assert instance.release_at == instance.stopped_at + timedelta(days=15)


def test_stop_start_release_round_trip_frees_every_card(launch, lifecycle):
    instance = launch(cards=4)
    settle()
    instance_lifecycle.stop(fresh(instance))
    settle()
    instance_lifecycle.start(fresh(instance))
    settle()
    instance.refresh_from_db()
    assert instance.status == Status.RUNNING and len(lifecycle.sessions_of(instance)) == 2

    instance_lifecycle.release(fresh(instance))
    settle()
    instance.refresh_from_db()
    assert instance.status == Status.RELEASED and instance.reserved_cards == 0
    assert sum(Node.objects.values_list("cards_reserved", flat=True)) == 0
    assert lifecycle.open_sessions() == []


@pytest.mark.parametrize(
    ("setup", "action"),
    [("running", "start"), ("stopped", "stop"), ("released", "start"), ("released", "release"), ("creating", "stop")],
)
def test_illegal_moves_are_refused_with_a_message(launch, setup, action):
    instance = launch()
    if setup != "creating":
        settle()
    if setup in ("stopped", "released"):
        instance_lifecycle.stop(fresh(instance))
        settle()
    if setup == "released":
        instance_lifecycle.release(fresh(instance))
        settle()
    instance = fresh(instance)
    with pytest.raises(Conflict) as exc:
        getattr(instance_lifecycle, action)(instance)
    assert "train-1" in str(exc.value.message) and exc.value.status == 409


def test_a_stale_copy_cannot_move_an_instance_twice(launch):
    instance = launch()
    settle()
    first, second = fresh(instance), fresh(instance)
    instance_lifecycle.stop(first)
    with pytest.raises(Conflict):
        instance_lifecycle.stop(second)
    assert instance.events.filter(new=Status.STOPPING).count() == 1


def test_a_launch_the_backend_refuses_fails_frees_its_cards_and_costs_nothing(launch, lifecycle):
    simulated.fail_next_submit()
    instance = launch(cards=8)
    settle()
    instance.refresh_from_db()
    assert instance.status == Status.FAILED and instance.status_reason == Reason.SUBMIT_FAILED
    assert instance.reserved_cards == 0 and Node.objects.get(pk=instance.node_id).cards_reserved == 0
    assert lifecycle.sessions_of(instance) == []


def test_a_launch_that_never_becomes_healthy_fails_after_the_timeout_uncharged(launch, lifecycle, settings):
    settings.INSTANCES_PROVISION_TIMEOUT_SECONDS = 120
    simulated.hang_next_submit()
    with time_machine.travel(timezone.now(), tick=False) as clock:
        instance = launch()
        settle()
        assert Instance.objects.get(pk=instance.pk).status == Status.STARTING
        clock.shift(timedelta(minutes=3))
        settle()
    instance.refresh_from_db()
    assert instance.status == Status.FAILED and instance.status_reason == Reason.NEVER_HEALTHY
    assert lifecycle.sessions_of(instance) == [] and instance.reserved_cards == 0


def test_a_crashed_node_fails_its_instances_and_billing_stops_at_the_crash(launch, lifecycle):
    with time_machine.travel(timezone.now(), tick=False) as clock:
        instance = launch()
        settle()
        clock.shift(timedelta(minutes=2))
        simulated.crash_node(instance.node)
        crashed = timezone.now()
        clock.shift(timedelta(minutes=5))  # reconcile notices later
        settle()
    instance.refresh_from_db()
    assert instance.status == Status.FAILED and instance.status_reason == Reason.NODE_LOST
    assert lifecycle.sessions_of(instance)[0].ended_at == crashed
    assert instance.reserved_cards == 0


def test_launch_needs_one_hour_of_balance(launch, lifecycle, owner):
    lifecycle.balances[owner.pk] = quoting.quote(chip=launch_chip(), cards=2).payable_per_hour / 2
    with pytest.raises(PaymentRequired):
        launch(cards=2)
    assert not Instance.objects.exists()
    assert sum(Node.objects.values_list("cards_reserved", flat=True)) == 0


def launch_chip():

    return Chip.objects.get(slug="ascend-910b")


@pytest.mark.parametrize(
    ("fields", "code"),
    [
        ({"chip": "ascend-910b", "image": "pytorch-2.2-cuda12"}, "incompatible_image"),
        ({"chip": "ascend-910b", "image": "nope"}, "unknown_image"),
        ({"chip": "ascend-910b", "cards": 3}, "invalid_cards"),
        ({"chip": "nope"}, "unknown_chip"),
        ({"backend": "tpu"}, "unknown_backend"),
        ({"chip": "ascend-910b", "backend": "npu"}, "invalid_chip"),
        ({"chip": "a100-80g", "zone": "cn-east-xc"}, "xinchuang_zone_domestic_only"),
        ({"chip": "ascend-910b", "name": "  "}, "invalid_name"),
        ({"chip": "ascend-910b", "plan": "daily", "spot": True}, "spot_not_offered"),
        ({"chip": "domestic-midrange-reference"}, "not_rentable"),
    ],
)
def test_bad_launch_requests_are_refused_and_write_nothing(launch, fields, code):
    with pytest.raises(ServiceError) as exc:
        launch(**fields)
    assert exc.value.code == code and exc.value.status == (404 if code in {"unknown_chip", "unknown_image"} else 400)
    assert not Instance.objects.exists()


def test_a_backend_family_launch_picks_the_cheapest_chip_with_free_cards(launch):
    instance = launch(backend="npu", cards=1, image="pytorch-2.2-cann8")
    assert instance.chip.slug == "ascend-910b"
    instance = launch(backend="cuda", cards=1, image="pytorch-2.2-cuda12")
    assert instance.chip.slug == "a800-80g"  # ¥3.8 beats the A100's ¥4.8; the 4090 has no price


def test_arrears_stop_pay_as_you_go_instances_with_the_checkpoint_signal(launch, lifecycle, owner):
    payg = launch(name="payg")
    daily = launch(name="daily", plan="daily")
    settle()
    assert instance_lifecycle.stop_for_arrears(owner.pk, "zero_balance") == 1
    settle()
    payg.refresh_from_db()
    daily.refresh_from_db()
    assert payg.status == Status.STOPPED and daily.status == Status.RUNNING
    assert payg.events.filter(reason=Reason.ARREARS).exists()
    assert lifecycle.open_sessions() == []


@pytest.mark.django_db(transaction=True)  # the launch's own transaction is the outermost, as in a request
def test_a_launch_whose_transaction_postgresql_aborts_for_a_deadlock_runs_again_and_launches_once(
    launch, lifecycle, monkeypatch
):
    import psycopg.errors

    gate, calls = instances_charges.check_launch_funds, []

    def deadlocked_once(user, quote, **kwargs):
        gate(user, quote, **kwargs)
        calls.append(1)
        if len(calls) == 1:  # as Django raises what psycopg reports
            raise OperationalError("deadlock detected") from psycopg.errors.DeadlockDetected("deadlock detected")

    monkeypatch.setattr(instances_charges, "check_launch_funds", deadlocked_once)
    instance = launch(cards=2)

    assert len(calls) == 2 and Instance.objects.count() == 1
    assert sum(Node.objects.values_list("cards_reserved", flat=True)) == 2 == fresh(instance).reserved_cards
