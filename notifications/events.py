"""What a delivery says: one event, built from a billing notification or for the "send a test" button."""

from dataclasses import dataclass, field

from django.conf import settings
from django.utils import translation
from django.utils.translation import gettext as _

from billing.models import Notification

from .choices import TEST_EVENT


@dataclass(frozen=True)
class Event:
    id: str
    event: str
    created_at: str  # ISO 8601, UTC
    title: str
    text: str
    data: dict = field(default_factory=dict)

    def as_json(self) -> dict:
        """The signed webhook's body."""
        return {"id": self.id, "event": self.event, "created_at": self.created_at, "text": self.text, "data": self.data}


def from_notification(notification: Notification) -> Event:
    """The notification in the console's language (robots post to a group, which has no language of its own)."""
    with translation.override(settings.LANGUAGE_CODE):
        return Event(
            id=str(notification.public_id),
            event=notification.kind,
            created_at=notification.created_at.isoformat(),
            title=str(notification.get_kind_display()),
            text=notification.message,
            data=dict(notification.params),
        )


def sample_event(delivery_id, at) -> Event:
    with translation.override(settings.LANGUAGE_CODE):
        return Event(
            id=str(delivery_id),
            event=TEST_EVENT,
            created_at=at.isoformat(),
            title=_("Test notification"),
            text=_("This is a test from the console: this channel receives your notifications."),
        )
