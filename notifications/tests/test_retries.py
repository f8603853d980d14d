"""Retries: a failed delivery waits 1 min, 5 min, 30 min and 2 h, and is given up at the fifth failure.

The clock is fixed and moved (time-machine); nothing sleeps.
"""

import json
from datetime import UTC, datetime, timedelta

import pytest
import time_machine

from billing import arrears
from billing.choices import NotificationKind
from notifications import services, tasks
from notifications.choices import ChannelKind, DeliveryStatus
from notifications.services import ChannelSpec

NOW = datetime(2026, 12, 6, 1, 0, tzinfo=UTC)


@pytest.fixture
def channel(owner, receiver):
    return services.create_channel(
        owner, ChannelSpec(kind=ChannelKind.WEBHOOK, name="ops", url=receiver.url(), secret="s")
    )


@pytest.mark.django_db(transaction=True)
def test_a_500_is_retried_after_a_minute_and_then_delivered(owner, channel, receiver):
    receiver.status = 500
    with time_machine.travel(NOW, tick=False):
        arrears.notify(owner.pk, NotificationKind.ARREARS, days=15)
    delivery = channel.deliveries.get()
    assert (delivery.status, delivery.response_code, delivery.attempts) == (DeliveryStatus.PENDING, 500, 1)
    assert delivery.next_attempt_at == NOW + timedelta(minutes=1)

    # Not yet due: the beat's task sends nothing.
    with time_machine.travel(NOW + timedelta(seconds=59), tick=False):
        tasks.retry_deliveries()
    assert len(receiver.requests) == 1

    receiver.status = 200
    with time_machine.travel(NOW + timedelta(minutes=1), tick=False):
        tasks.retry_deliveries()
    delivery.refresh_from_db()
    assert (delivery.status, delivery.response_code, delivery.attempts) == (DeliveryStatus.SENT, 200, 2)
    first, second = (json.loads(r.body) for r in receiver.requests)
    assert first["id"] == second["id"]  # the same event: a receiver can drop a duplicate by its id


@pytest.mark.django_db(transaction=True)
def test_backoff_grows_and_the_fifth_failure_gives_up(owner, channel, receiver):
    receiver.status = 500
    with time_machine.travel(NOW, tick=False):
        arrears.notify(owner.pk, NotificationKind.ARREARS, days=15)
    delivery = channel.deliveries.get()
    at, waits = NOW, []
    while delivery.next_attempt_at is not None:
        waits.append(delivery.next_attempt_at - at)
        at = delivery.next_attempt_at
        with time_machine.travel(at, tick=False):
            tasks.retry_deliveries()
        delivery.refresh_from_db()
    assert waits == [timedelta(minutes=1), timedelta(minutes=5), timedelta(minutes=30), timedelta(hours=2)]
    assert (delivery.status, delivery.attempts) == (DeliveryStatus.FAILED, 5)
    assert len(receiver.requests) == 5


@pytest.mark.django_db(transaction=True)
def test_running_the_fan_out_twice_sends_once(owner, channel, receiver):
    with time_machine.travel(NOW, tick=False):
        notification = arrears.notify(owner.pk, NotificationKind.ARREARS, days=15)
        tasks.deliver_notification(notification.pk)
        tasks.retry_deliveries()
    assert len(receiver.requests) == 1
    assert channel.deliveries.count() == 1


@pytest.mark.django_db(transaction=True)
def test_a_notification_of_an_account_without_channels_costs_one_query(owner, django_assert_num_queries):
    notification = arrears.notify(owner.pk, NotificationKind.ARREARS, days=15)
    with django_assert_num_queries(1):
        tasks.deliver_notification(notification.pk)
