"""An e-mail channel sends each event to the address entered on it, beside the mail the account already gets."""

import pytest
from django.core import mail

from billing import arrears
from billing.choices import NotificationKind
from core.field_errors import FieldError
from notifications import services
from notifications.choices import ChannelKind, DeliveryStatus
from notifications.services import ChannelSpec

pytestmark = pytest.mark.django_db(transaction=True)


def test_an_event_is_mailed_to_the_channels_address(owner):
    channel = services.create_channel(
        owner, ChannelSpec(kind=ChannelKind.EMAIL, name="on-call", email="oncall@example.com")
    )
    arrears.notify(owner.pk, NotificationKind.ARREARS, days=15)
    assert sorted(m.to[0] for m in mail.outbox) == ["oncall@example.com", "owner@example.com"]
    assert channel.deliveries.get().status == DeliveryStatus.SENT


def test_an_email_channel_needs_an_address(owner):
    with pytest.raises(FieldError) as refused:
        services.create_channel(owner, ChannelSpec(kind=ChannelKind.EMAIL, name="x"))
    assert refused.value.field == "email"
