"""The kinds of channel and the states of a delivery."""

from datetime import timedelta

from django.db import models
from django.utils.translation import gettext_lazy as _


class ChannelKind(models.TextChoices):
    EMAIL = "email", _("E-mail")
    WEBHOOK = "webhook", _("Signed webhook")
    WECOM = "wecom", _("WeCom group robot")
    DINGTALK = "dingtalk", _("DingTalk robot")
    FEISHU = "feishu", _("Feishu bot")


# The kinds that POST to a URL the user gives (everything but e-mail).
URL_KINDS = frozenset({ChannelKind.WEBHOOK, ChannelKind.WECOM, ChannelKind.DINGTALK, ChannelKind.FEISHU})


class DeliveryStatus(models.TextChoices):
    PENDING = "pending", _("Pending")
    SENT = "sent", _("Sent")
    FAILED = "failed", _("Failed")

    @property
    def badge(self) -> str:
        return {"pending": "secondary", "sent": "success", "failed": "danger"}[self.value]


# The wait after the first, second, third and fourth failed attempt; the fifth failure gives the delivery up.
RETRY_DELAYS = (timedelta(minutes=1), timedelta(minutes=5), timedelta(minutes=30), timedelta(hours=2))
MAX_ATTEMPTS = len(RETRY_DELAYS) + 1

# The event name of a test delivery (the "send a test" button).
TEST_EVENT = "test"
