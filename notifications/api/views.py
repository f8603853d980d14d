"""``/api/v1/notifications``: the in-console notifications, and the channels they are delivered to, with each
channel's delivery log and a test send."""

from drf_spectacular.utils import PolymorphicProxySerializer, extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from billing.models import Notification
from core.api.parsers import JSONParser
from core.api.schema import AutoSchema
from teams import roles
from teams.context import account_for

from .. import services
from ..choices import ChannelKind
from ..models import Channel, Delivery
from .serializers import (
    ChannelSerializer,
    DeliverySerializer,
    EmailChannelInput,
    NotificationSerializer,
    RobotChannelInput,
    WebhookChannelInput,
)

# A new channel's body, one shape per kind: an e-mail channel needs its address, a webhook its URL and secret, a
# robot its URL (and its secret in signed mode).
CHANNEL_CREATE = PolymorphicProxySerializer(
    component_name="ChannelCreate",
    serializers=[EmailChannelInput, WebhookChannelInput, RobotChannelInput],
    resource_type_field_name=None,
)
CHANNEL_INPUTS = {
    ChannelKind.EMAIL: EmailChannelInput,
    ChannelKind.WEBHOOK: WebhookChannelInput,
    ChannelKind.WECOM: RobotChannelInput,
    ChannelKind.DINGTALK: RobotChannelInput,
    ChannelKind.FEISHU: RobotChannelInput,
}

UUID_REGEX = "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"


def _spec(data: dict, current: Channel | None = None) -> services.ChannelSpec:
    """The service's input from validated data; a PATCH keeps what it does not send."""

    def pick(name, default):
        return data[name] if name in data else (getattr(current, name) if current else default)

    return services.ChannelSpec(
        kind=pick("kind", ""),
        name=pick("name", ""),
        url=pick("url", ""),
        email=pick("email", ""),
        secret=data.get("secret"),
        events=tuple(pick("events", ())),
        enabled=pick("enabled", True),
    )


class ChannelSchema(AutoSchema):
    """The create's body is one of the per-kind shapes, and required (drf-spectacular cannot tell from a oneOf)."""

    def _get_request_body(self, direction="request"):
        body = super()._get_request_body(direction)
        if body and getattr(self.view, "action", None) == "create":
            body["required"] = True
        return body


class ChannelViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """The channels of the caller's account (or of the team the token is for): e-mail, signed webhook, 企业微信,
    钉钉 and 飞书 robots. A team's channels are changed by its owners and admins."""

    serializer_class = ChannelSerializer
    team_scoped = True  # a team's token manages the team's channels
    # JSON only: a channel's body has a shape per kind, which the schema says for JSON (a form has no such shapes).
    parser_classes = [JSONParser]
    schema = ChannelSchema()
    lookup_field = "public_id"
    lookup_value_regex = UUID_REGEX

    def get_queryset(self):
        account = account_for(self.request, roles.VIEW)
        return Channel.objects.for_user(self.request.user).filter(owner=account)

    def get_object(self):
        return services.get_channel(self.request.user, self.kwargs["public_id"])

    @extend_schema(request=CHANNEL_CREATE, responses={201: ChannelSerializer})
    def create(self, request):
        account = account_for(request, roles.MEMBERS)
        kind = ChannelSerializer(data=request.data, partial=True)
        kind.is_valid(raise_exception=True)
        serializer = CHANNEL_INPUTS.get(kind.validated_data.get("kind"), ChannelSerializer)(data=request.data)
        serializer.is_valid(raise_exception=True)
        channel = services.create_channel(account, _spec(serializer.validated_data))
        return Response(ChannelSerializer(channel).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=ChannelSerializer, responses={200: ChannelSerializer})
    def partial_update(self, request, public_id=None):
        current = services.get_channel(request.user, public_id, "change")
        serializer = ChannelSerializer(current, data=request.data, partial=True)
        serializer.is_valid(raise_exception=True)
        channel = services.update_channel(request.user, public_id, _spec(serializer.validated_data, current))
        return Response(ChannelSerializer(channel).data)

    @extend_schema(responses={204: None})
    def destroy(self, request, public_id=None):
        services.delete_channel(request.user, public_id)
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(request=None, responses={200: DeliverySerializer})
    @action(detail=True, methods=["post"])
    def test(self, request, public_id=None):
        """Send a test event now (one attempt) and return its logged outcome."""
        delivery = services.send_test(request.user, public_id)
        return Response(DeliverySerializer(delivery).data)

    @extend_schema(responses={200: DeliverySerializer(many=True)})
    @action(detail=True, methods=["get"])
    def deliveries(self, request, public_id=None):
        """The channel's delivery log, newest first."""
        channel = services.get_channel(request.user, public_id)
        queryset = Delivery.objects.filter(channel=channel).select_related("channel", "notification")
        page = self.paginate_queryset(queryset)
        return self.get_paginated_response(DeliverySerializer(page, many=True).data)


class NotificationViewSet(mixins.ListModelMixin, viewsets.GenericViewSet):
    """The in-console notifications of the caller's account (or the token's team), newest first."""

    serializer_class = NotificationSerializer
    team_scoped = True

    def get_queryset(self):
        account = account_for(self.request, roles.VIEW)
        return Notification.objects.filter(user=account)
