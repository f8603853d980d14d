"""The operations on channels and deliveries — the only writers of either, used by the pages, the API, the tasks.

A delivery is claimed before it is sent (compare-and-set on ``next_attempt_at``), so two workers, or a beat tick
beside the task that fanned a notification out, never send it twice at once. A failed attempt waits
``RETRY_DELAYS`` before the next; the fifth failure, or a refused destination, gives it up.
"""

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.utils import timezone
from django.utils.translation import gettext as _

from billing.choices import NotificationKind
from billing.models import Notification
from core.errors import NotFound
from core.field_errors import FieldError
from teams import access

from . import destinations, events, senders
from .choices import MAX_ATTEMPTS, RETRY_DELAYS, TEST_EVENT, URL_KINDS, ChannelKind, DeliveryStatus
from .models import Channel, Delivery

# How long a claimed attempt holds its delivery: longer than a send can take, so nobody else sends it meanwhile.
CLAIM_SECONDS = 60


@dataclass(frozen=True)
class ChannelSpec:
    """What the user sets on a channel (a form's or a serializer's cleaned data)."""

    kind: str
    name: str
    url: str = ""
    email: str = ""
    secret: str | None = None  # None: keep the saved one
    events: tuple[str, ...] = ()
    enabled: bool = True


def _validate(spec: ChannelSpec) -> None:
    unknown = set(spec.events) - set(NotificationKind.values)
    if unknown:
        raise FieldError("events", _("Unknown events: %(events)s.") % {"events": ", ".join(sorted(unknown))})
    if spec.kind == ChannelKind.EMAIL:
        if not spec.email:
            raise FieldError("email", _("Enter the address to send to."))
        return
    if not spec.url:
        raise FieldError("url", _("Enter the robot's or the endpoint's URL."))
    try:
        destinations.check(spec.url)
    except destinations.RefusedDestination as exc:
        raise FieldError("url", exc.message) from exc


def _apply(channel: Channel, spec: ChannelSpec) -> Channel:
    _validate(spec)
    channel.kind, channel.name, channel.enabled = spec.kind, spec.name, spec.enabled
    channel.url = spec.url if spec.kind in URL_KINDS else ""
    channel.email = spec.email if spec.kind == ChannelKind.EMAIL else ""
    channel.events = sorted(set(spec.events))
    if spec.secret is not None:
        channel.secret = spec.secret
    if channel.kind == ChannelKind.WEBHOOK and not channel.has_secret:
        # The receiver's only proof that a delivery came from the console is the signature.
        raise FieldError("secret", _("A signed webhook needs a secret to sign its deliveries with."))
    channel.save()
    return channel


def create_channel(account, spec: ChannelSpec) -> Channel:
    """A new channel of ``account`` (the person, or a team's account the caller manages: the views check that)."""
    return _apply(Channel(owner=account), spec)


def get_channel(user, public_id, action: str = "view") -> Channel:
    """The channel ``user`` may ``action``: someone else's and a missing one are the same 404; a team member who may
    only look gets a 403 naming their role."""
    found = Channel.objects.for_user(user, action).filter(public_id=public_id).first()
    if found is None:
        access.refuse_if_seen(user, Channel.objects.all(), action, public_id=public_id)
        raise NotFound(_("No such notification channel."))
    return found


def update_channel(user, public_id, spec: ChannelSpec) -> Channel:
    return _apply(get_channel(user, public_id, "change"), spec)


def delete_channel(user, public_id) -> Channel:
    channel = get_channel(user, public_id, "delete")
    channel.delete()
    return channel


def _record(delivery: Delivery, outcome: senders.Outcome, now: datetime, *, retry: bool) -> None:
    delivery.attempts += 1
    delivery.attempted_at = now
    delivery.response_code = outcome.status_code
    delivery.response_excerpt = outcome.excerpt
    delivery.error = outcome.error[:300]
    if outcome.ok:
        delivery.status, delivery.sent_at, delivery.next_attempt_at = DeliveryStatus.SENT, now, None
    elif outcome.permanent or not retry or delivery.attempts >= MAX_ATTEMPTS:
        delivery.status, delivery.next_attempt_at = DeliveryStatus.FAILED, None
    else:
        delivery.next_attempt_at = now + RETRY_DELAYS[delivery.attempts - 1]
    delivery.save()


def _event_for(delivery: Delivery) -> events.Event:
    if delivery.notification_id is None:
        return events.sample_event(delivery.public_id, delivery.created_at)
    return events.from_notification(delivery.notification)


def attempt(delivery_id: int, now: datetime | None = None) -> Delivery | None:
    """Send a due delivery once, if this caller wins the claim; record the outcome and when to retry."""
    now = now or timezone.now()
    claimed = (
        Delivery.objects.due(now).filter(pk=delivery_id).update(next_attempt_at=now + timedelta(seconds=CLAIM_SECONDS))
    )
    if not claimed:
        return None
    delivery = Delivery.objects.select_related("channel", "notification").get(pk=delivery_id)
    outcome = senders.send(delivery.channel, _event_for(delivery), now.timestamp())
    _record(delivery, outcome, now, retry=delivery.notification_id is not None)
    return delivery


def fan_out(notification_id: int, now: datetime | None = None) -> list[Delivery]:
    """Create a delivery of the notification for each of its owner's channels that take it, and try each once.
    Running it again creates nothing new (one delivery per channel and notification)."""
    now = now or timezone.now()
    # One query in the common case of an account with no channels: every notification of the console passes here.
    candidates = list(Channel.objects.filter(enabled=True, owner__billing_notifications=notification_id))
    if not candidates:
        return []
    notification = Notification.objects.get(pk=notification_id)
    channels = [channel for channel in candidates if channel.takes(notification.kind)]
    Delivery.objects.bulk_create(
        [
            Delivery(channel=c, notification=notification, event=notification.kind, next_attempt_at=now)
            for c in channels
        ],
        ignore_conflicts=True,
    )
    due = Delivery.objects.due(now).filter(notification=notification).values_list("pk", flat=True)
    return [d for d in (attempt(pk, now) for pk in list(due)) if d is not None]


def retry_due(now: datetime | None = None) -> int:
    """Attempt every pending delivery whose time has come (the beat's task); the number attempted."""
    now = now or timezone.now()
    return sum(attempt(pk, now) is not None for pk in list(Delivery.objects.due(now).values_list("pk", flat=True)))


def send_test(user, public_id, now: datetime | None = None) -> Delivery:
    """Send a test event to a channel at once (one attempt, no retry) and return its logged outcome."""
    channel = get_channel(user, public_id, "change")
    now = now or timezone.now()
    delivery = Delivery.objects.create(channel=channel, event=TEST_EVENT, created_at=now, next_attempt_at=now)
    return attempt(delivery.pk, now) or delivery
