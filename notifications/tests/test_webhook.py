"""The signed webhook: what a receiver gets, and the ten-line check from docs/notifications.md that verifies it."""

import hashlib
import hmac
import json
import time
from datetime import UTC, datetime

import pytest
import time_machine

from billing import arrears
from billing.choices import NotificationKind
from core.field_errors import FieldError
from notifications import services
from notifications.choices import ChannelKind, DeliveryStatus
from notifications.models import Channel
from notifications.services import ChannelSpec

NOW = datetime(2026, 12, 6, 1, 0, tzinfo=UTC)
SECRET = "whsec_test_only_7d1f"


# Copied from docs/notifications.md ("Verifying a signature"), as a user would write it.
def verify(secret: str, headers: dict, body: bytes, tolerance: int = 300) -> bool:
    timestamp = headers["X-GPUCloud-Timestamp"]
    if abs(time.time() - int(timestamp)) > tolerance:
        return False  # too old: a replay
    signed = timestamp.encode() + b"." + body
    expected = "sha256=" + hmac.new(secret.encode(), signed, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected, headers["X-GPUCloud-Signature"])


@pytest.fixture
def webhook(owner, receiver):
    return services.create_channel(
        owner, ChannelSpec(kind=ChannelKind.WEBHOOK, name="ops", url=receiver.url(), secret=SECRET)
    )


@pytest.mark.django_db(transaction=True)
def test_a_notification_arrives_signed_and_verifies_with_the_documented_check(owner, webhook, receiver):
    with time_machine.travel(NOW, tick=False):
        notification = arrears.notify(owner.pk, NotificationKind.LOW_BALANCE, balance="3.00", hourly="4.200000")

        [request] = receiver.requests
        assert verify(SECRET, request.headers, request.body)
    assert request.headers["X-GPUCloud-Timestamp"] == str(int(NOW.timestamp()))
    body = json.loads(request.body)
    assert set(body) == {"id", "event", "created_at", "text", "data"}
    assert body["id"] == str(notification.public_id)
    assert body["event"] == "low_balance"
    assert body["data"] == {"balance": "3.00", "hourly": "4.200000"}
    assert "¥3.00" in body["text"]
    delivery = webhook.deliveries.get()
    assert (delivery.status, delivery.response_code, delivery.attempts) == (DeliveryStatus.SENT, 200, 1)


@pytest.mark.django_db(transaction=True)
def test_a_changed_body_or_a_wrong_secret_fails_the_check(owner, webhook, receiver):
    with time_machine.travel(NOW, tick=False):
        arrears.notify(owner.pk, NotificationKind.ARREARS, days=15)
        [request] = receiver.requests
        assert not verify(SECRET, request.headers, request.body.replace(b"15", b"16"))
        assert not verify("another secret", request.headers, request.body)
    with time_machine.travel(NOW.timestamp() + 3600, tick=False):
        assert not verify(SECRET, request.headers, request.body)  # replayed an hour later


@pytest.mark.django_db(transaction=True)
def test_a_channel_gets_only_the_events_it_chose(owner, receiver):
    services.create_channel(
        owner,
        ChannelSpec(kind=ChannelKind.WEBHOOK, secret="s", name="arrears only", url=receiver.url(), events=("arrears",)),
    )
    arrears.notify(owner.pk, NotificationKind.LOW_BALANCE, balance="3.00", hourly="4.00")
    assert receiver.requests == []
    arrears.notify(owner.pk, NotificationKind.ARREARS, days=15)
    assert [json.loads(r.body)["event"] for r in receiver.requests] == ["arrears"]


@pytest.mark.django_db(transaction=True)
def test_a_disabled_channel_and_another_users_channel_get_nothing(owner, stranger, receiver):
    services.create_channel(
        owner, ChannelSpec(kind=ChannelKind.WEBHOOK, secret="s", name="off", url=receiver.url(), enabled=False)
    )
    services.create_channel(
        stranger, ChannelSpec(kind=ChannelKind.WEBHOOK, secret="s", name="theirs", url=receiver.url())
    )
    arrears.notify(owner.pk, NotificationKind.ARREARS, days=15)
    assert receiver.requests == []


@pytest.mark.django_db(transaction=True)
def test_the_secret_is_encrypted_at_rest(owner, webhook):
    stored = Channel.objects.filter(pk=webhook.pk).values_list("secret_encrypted", flat=True).get()
    assert SECRET not in stored
    assert Channel.objects.get(pk=webhook.pk).secret == SECRET


@pytest.mark.django_db
def test_a_webhook_without_a_secret_is_refused(owner, receiver):
    with pytest.raises(FieldError) as refused:
        services.create_channel(owner, ChannelSpec(kind=ChannelKind.WEBHOOK, name="unsigned", url=receiver.url()))
    assert refused.value.field == "secret"
    assert not Channel.objects.exists()
