"""Where a user's notifications go (channels) and what happened to each one sent there (deliveries)."""

import uuid
from urllib.parse import urlsplit

from django.conf import settings
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from billing.models import Notification
from core import encryption

from .choices import TEST_EVENT, ChannelKind, DeliveryStatus
from .querysets import ChannelQuerySet, DeliveryQuerySet

# How much of a receiver's answer the log keeps: enough to read an error message, not a page of HTML.
RESPONSE_EXCERPT_CHARS = 500


class Channel(models.Model):
    """A destination for an account's notifications: an e-mail address, a signed webhook, or a 企业微信, 钉钉 or
    飞书 group robot. A team's channels are owned by the team's account and managed by its owners and admins."""

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notification_channels")
    kind = models.CharField(_("kind"), max_length=16, choices=ChannelKind.choices)
    name = models.CharField(_("name"), max_length=80)
    url = models.URLField(_("URL"), max_length=500, blank=True)
    email = models.EmailField(_("e-mail address"), blank=True)
    # The signing secret, encrypted at rest (core.encryption): the console reads it back to sign each delivery.
    secret_encrypted = models.TextField(blank=True, editable=False)
    # The notification kinds this channel takes; empty means every kind.
    events = models.JSONField(_("events"), default=list, blank=True)
    enabled = models.BooleanField(_("enabled"), default=True)
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    updated_at = models.DateTimeField(auto_now=True)

    objects = ChannelQuerySet.as_manager()

    class Meta:
        verbose_name = _("notification channel")
        verbose_name_plural = _("notification channels")
        ordering = ["name", "id"]

    def __str__(self):
        return f"{self.name} ({self.kind})"

    @property
    def secret(self) -> str:
        return encryption.decrypt(self.secret_encrypted) if self.secret_encrypted else ""

    @secret.setter
    def secret(self, value: str) -> None:
        self.secret_encrypted = encryption.encrypt(value) if value else ""

    @property
    def has_secret(self) -> bool:
        return bool(self.secret_encrypted)

    @property
    def destination(self) -> str:
        """Where it sends, for lists: the address, or the URL's host (a robot's URL carries its token)."""
        if self.kind == ChannelKind.EMAIL:
            return self.email
        return urlsplit(self.url).hostname or ""

    def takes(self, event: str) -> bool:
        return event == TEST_EVENT or not self.events or event in self.events


class Delivery(models.Model):
    """One notification (or a test event) sent to one channel: each attempt's outcome, and when to try again."""

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    channel = models.ForeignKey(Channel, on_delete=models.CASCADE, related_name="deliveries")
    notification = models.ForeignKey(
        Notification, on_delete=models.CASCADE, null=True, blank=True, related_name="deliveries"
    )
    event = models.CharField(_("event"), max_length=32)
    status = models.CharField(
        _("status"), max_length=16, choices=DeliveryStatus.choices, default=DeliveryStatus.PENDING
    )
    attempts = models.PositiveSmallIntegerField(_("attempts"), default=0)
    response_code = models.PositiveSmallIntegerField(_("response code"), null=True, blank=True)
    response_excerpt = models.CharField(_("response"), max_length=RESPONSE_EXCERPT_CHARS, blank=True)
    error = models.CharField(_("error"), max_length=300, blank=True)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    attempted_at = models.DateTimeField(null=True, blank=True)
    sent_at = models.DateTimeField(null=True, blank=True)

    objects = DeliveryQuerySet.as_manager()

    class Meta:
        verbose_name = _("notification delivery")
        verbose_name_plural = _("notification deliveries")
        ordering = ["-created_at", "-id"]
        constraints = [
            # A notification goes to a channel once, however often the task that fans it out runs.
            models.UniqueConstraint(
                fields=["channel", "notification"],
                condition=models.Q(notification__isnull=False),
                name="notifications_one_delivery_per_channel",
            )
        ]
        indexes = [models.Index(fields=["status", "next_attempt_at"], name="notif_delivery_due")]

    def __str__(self):
        return f"{self.event} → {self.channel_id} ({self.status})"

    @property
    def status_badge(self) -> str:
        return DeliveryStatus(self.status).badge
