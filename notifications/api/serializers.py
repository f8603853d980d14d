"""The notifications API's serializers (strict JSON types, like every serializer of the API)."""

from django.core.validators import RegexValidator, validate_email
from rest_framework import serializers

from billing.choices import NotificationKind
from billing.models import Notification
from core.api import strict
from core.api.schema import named_format

from ..choices import ChannelKind
from ..models import Channel, Delivery

PUBLIC_URL_FORMAT = "public-https-url"


@named_format(
    PUBLIC_URL_FORMAT,
    "An https:// URL whose host is, and resolves to, a public address: private, loopback, link-local, "
    "carrier-grade NAT and reserved addresses are refused.",
)
class PublicUrlField(serializers.URLField):
    """A channel's URL (checked by ``notifications.destinations.check`` when the channel is saved)."""


class ChannelSerializer(strict.ModelSerializer):
    id = serializers.UUIDField(source="public_id", read_only=True)
    kind = serializers.ChoiceField(choices=ChannelKind.choices)
    # Plain text here (empty for an e-mail channel); a change is checked as a new channel's URL is.
    url = serializers.CharField(
        required=False, allow_blank=True, max_length=500, help_text="The robot's or endpoint's URL (not for e-mail)."
    )
    email = serializers.EmailField(required=False, allow_blank=True, help_text="Where an e-mail channel sends.")
    secret = serializers.CharField(
        write_only=True,
        required=False,
        allow_blank=True,
        max_length=200,
        help_text="The signing secret (webhook; 钉钉 and 飞书 signed mode). Never returned; omit it to keep the saved "
        "one, send an empty string to remove it.",
    )
    has_secret = serializers.BooleanField(read_only=True)
    events = serializers.ListField(
        child=serializers.ChoiceField(choices=NotificationKind.choices),
        required=False,
        help_text="The notification kinds sent here; empty means all.",
    )
    enabled = serializers.BooleanField(required=False, default=True)

    class Meta:
        model = Channel
        fields = ["id", "kind", "name", "url", "email", "secret", "has_secret", "events", "enabled", "created_at"]
        read_only_fields = ["id", "has_secret", "created_at"]


class _ChannelInput(strict.Serializer):
    """What every new channel says (the schema's shape of a create, one variant per kind)."""

    name = serializers.CharField(max_length=80)
    events = serializers.ListField(
        child=serializers.ChoiceField(choices=NotificationKind.choices),
        required=False,
        help_text="The notification kinds sent here; empty means all.",
    )
    enabled = serializers.BooleanField(required=False, default=True)


# A plain address, as the schema can say it (a dot-atom local part, a host name with a letters-only top-level
# domain): every address it admits, Django's own check admits too.
EMAIL_PATTERN = (
    r"^[A-Za-z0-9_%+-]{1,64}(\.[A-Za-z0-9_%+-]{1,20}){0,3}@([A-Za-z0-9]([A-Za-z0-9-]{0,20}[A-Za-z0-9])?\.){1,3}"
    r"[A-Za-z]{2,20}$"
)


class EmailChannelInput(_ChannelInput):
    kind = serializers.ChoiceField(choices=[ChannelKind.EMAIL])
    email = serializers.CharField(
        max_length=254,
        validators=[RegexValidator(EMAIL_PATTERN), validate_email],
        help_text="Where each event is mailed.",
    )


class WebhookChannelInput(_ChannelInput):
    kind = serializers.ChoiceField(choices=[ChannelKind.WEBHOOK])
    url = PublicUrlField(max_length=500)
    secret = serializers.CharField(max_length=200, help_text="Signs each delivery (X-GPUCloud-Signature).")


class RobotChannelInput(_ChannelInput):
    kind = serializers.ChoiceField(choices=[ChannelKind.WECOM, ChannelKind.DINGTALK, ChannelKind.FEISHU])
    url = PublicUrlField(max_length=500, help_text="The robot's webhook address.")
    secret = serializers.CharField(
        required=False, allow_blank=True, max_length=200, help_text="钉钉 加签 or 飞书 签名校验 key, if set."
    )


class DeliverySerializer(strict.ModelSerializer):
    id = serializers.UUIDField(source="public_id", read_only=True)
    channel = serializers.UUIDField(source="channel.public_id", read_only=True)
    notification = serializers.UUIDField(source="notification.public_id", read_only=True, allow_null=True)

    class Meta:
        model = Delivery
        fields = [
            "id",
            "channel",
            "notification",
            "event",
            "status",
            "attempts",
            "response_code",
            "response_excerpt",
            "error",
            "created_at",
            "attempted_at",
            "sent_at",
            "next_attempt_at",
        ]
        read_only_fields = fields


class NotificationSerializer(strict.ModelSerializer):
    id = serializers.UUIDField(source="public_id", read_only=True)
    message = serializers.CharField(read_only=True)

    class Meta:
        model = Notification
        fields = ["id", "kind", "message", "params", "created_at", "read_at"]
        read_only_fields = fields
