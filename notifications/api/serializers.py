"""The notifications API's serializers (strict JSON types, like every serializer of the API)."""

from rest_framework import serializers

from billing.choices import NotificationKind
from billing.models import Notification
from core.api import strict

from ..choices import ChannelKind
from ..models import Channel, Delivery


class ChannelSerializer(strict.ModelSerializer):
    id = serializers.UUIDField(source="public_id", read_only=True)
    kind = serializers.ChoiceField(choices=ChannelKind.choices)
    url = serializers.URLField(
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
