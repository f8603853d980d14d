"""The billing ↔ instances contract against the real money side (no fake): metering opens when an instance is
running, closes when the stop is asked, and the arrears handler stops pay-as-you-go instances."""

import uuid
from datetime import timedelta
from decimal import Decimal

import pytest
import time_machine
from django.utils import timezone

from billing import metering, wallet
from billing.models import UsageSession
from core.errors import PaymentRequired
from instances import costs, launching, lifecycle
from instances.choices import Reason, Status
from instances.models import Instance
from instances.tests.fixtures import settle

pytestmark = pytest.mark.django_db


def _fund(user, amount):
    wallet.adjust_balance(
        user=user, amount=Decimal(amount), reason="test", staff=None, idempotency_key=str(uuid.uuid4())
    )


def _launch(user, **fields):
    request = launching.LaunchRequest(name="real", chip="mlu370-x8", image="pytorch-2.2-neuware", **fields)
    return launching.launch(user, request)


def test_launch_without_one_hour_of_balance_is_refused(owner, catalog, instant):
    with pytest.raises(PaymentRequired):
        _launch(owner)
    assert not Instance.objects.exists()


def test_running_time_is_metered_from_running_to_the_stop_request(owner, catalog, instant):
    _fund(owner, "10")
    with time_machine.travel(timezone.now(), tick=False) as clock:
        instance = _launch(owner)
        clock.shift(timedelta(minutes=2))
        assert not UsageSession.objects.exists()  # creating and starting are free
        settle()
        clock.shift(timedelta(minutes=20, seconds=1))
        lifecycle.stop(Instance.objects.with_related().get(pk=instance.pk))
        asked = timezone.now()
        clock.shift(timedelta(minutes=3))
        settle()
    session = UsageSession.objects.get(resource_id=instance.public_id)
    assert session.ended_at == asked and session.charged_minutes == 21
    assert costs.cost_so_far(Instance.objects.get(pk=instance.pk)) == Decimal("0.54")  # 21 min × ¥1.53/h


def test_arrears_stop_pay_as_you_go_instances_through_the_real_handler(
    owner, catalog, instant, django_capture_on_commit_callbacks
):
    _fund(owner, "2")
    with time_machine.travel(timezone.now(), tick=False) as clock:
        instance = _launch(owner)
        settle()
        clock.shift(timedelta(minutes=90))  # ¥2.30 due on a ¥2 balance
        with django_capture_on_commit_callbacks(execute=True):
            metering.meter()
        settle()
    instance = Instance.objects.get(pk=instance.pk)
    assert instance.status == Status.STOPPED and instance.status_reason == Reason.STOPPED
    assert instance.events.filter(reason=Reason.ARREARS).exists()
    assert UsageSession.objects.get(resource_id=instance.public_id).ended_at is not None


def test_an_instance_whose_usage_cannot_be_recorded_does_not_run(owner, catalog, instant, monkeypatch):
    # The money side is called directly: when it cannot record the usage session (here its function is missing,
    # as after a broken deploy), the move to running rolls back with it, so the instance never runs unmetered;
    # once the money side is whole again, it runs and is metered.
    _fund(owner, "10")
    instance = _launch(owner)

    monkeypatch.delattr(metering, "open_usage")
    try:
        settle()
    except AttributeError:
        pass
    instance = Instance.objects.get(pk=instance.pk)
    assert instance.status != Status.RUNNING
    assert not UsageSession.objects.filter(resource_id=instance.public_id).exists()

    monkeypatch.undo()
    settle()
    assert Instance.objects.get(pk=instance.pk).status == Status.RUNNING
    assert UsageSession.objects.open().filter(resource_id=instance.public_id).exists()


def test_a_prepaid_term_that_cannot_be_charged_does_not_run(owner, catalog, instant, monkeypatch):
    _fund(owner, "100")
    instance = _launch(owner, plan="daily")

    def ledger_down(**kwargs):
        raise RuntimeError("the ledger is not answering")

    monkeypatch.setattr(wallet, "charge_upfront", ledger_down)
    try:
        settle()
    except RuntimeError:
        pass
    instance = Instance.objects.get(pk=instance.pk)
    assert instance.status != Status.RUNNING and instance.term_ends_at is None

    monkeypatch.undo()
    settle()
    instance = Instance.objects.get(pk=instance.pk)
    assert instance.status == Status.RUNNING and instance.term_ends_at is not None
