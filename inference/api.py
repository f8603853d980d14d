"""The REST API of inference endpoints and templates (``/api/v1/endpoints``, ``/api/v1/inference-templates``).

Owners (and a team's members, by role) only: a missing endpoint and someone else's answer the same 404. The calls
to the model itself go to the OpenAI-compatible ``/v1/…`` paths with an endpoint key (``inference.proxy``).
"""

from django.urls import re_path
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from catalog.models import Chip
from core.api import strict
from core.api.validators import AtLeast, AtMost
from inference import template_catalog as inference
from instances import lifecycle
from teams.context import account_for
from teams.models import TeamEvent
from teams.services import record

from . import services as endpoints


class TemplateSerializer(strict.Serializer):
    slug = serializers.CharField()
    model = serializers.CharField(source="model.repo")
    framework = serializers.CharField()
    family = serializers.CharField()
    image_variant = serializers.CharField(source="variant.slug")
    cards = serializers.IntegerField()
    arguments = serializers.CharField()
    chips = serializers.ListField(child=serializers.CharField())
    needs_a_card = serializers.BooleanField()
    refusal = serializers.SerializerMethodField(help_text="Why it cannot be deployed here; empty when it can.")

    def get_refusal(self, template) -> str:
        return inference.card_refusal(template, self.context["node_backends"], self.context["chips"])


class KeySerializer(strict.Serializer):
    id = serializers.UUIDField(source="public_id")
    name = serializers.CharField()
    prefix = serializers.CharField()
    created_at = serializers.DateTimeField()
    last_used_at = serializers.DateTimeField()
    revoked_at = serializers.DateTimeField()


class EndpointSerializer(strict.Serializer):
    id = serializers.UUIDField(source="public_id")
    name = serializers.CharField(source="instance.name")
    instance = serializers.UUIDField(source="instance.public_id")
    template = serializers.CharField(source="template.slug")
    model = serializers.CharField(source="served_model")
    status = serializers.CharField(source="instance.status")
    chip = serializers.CharField(source="instance.chip.slug", default=None)
    cards = serializers.IntegerField(source="instance.cards")
    price_per_hour = serializers.DecimalField(source="instance.price_per_hour", max_digits=16, decimal_places=6)
    idle_stop_minutes = serializers.IntegerField()
    base_url = serializers.SerializerMethodField()
    created_at = serializers.DateTimeField()

    def get_base_url(self, endpoint) -> str:
        return self.context["request"].build_absolute_uri("/v1")


class DeploySerializer(strict.Serializer):
    template = serializers.CharField(max_length=64)
    chip = serializers.CharField(max_length=64, required=False, allow_blank=True, default="")
    name = serializers.CharField(max_length=64, required=False, allow_blank=True, default="")
    idle_stop_minutes = serializers.IntegerField(
        required=False,
        allow_null=True,
        default=None,
        validators=[
            AtLeast(endpoints.MIN_IDLE_MINUTES, refuse=endpoints.check_idle),
            AtMost(endpoints.MAX_IDLE_MINUTES, refuse=endpoints.check_idle),
        ],
        help_text="Scale to zero after this many idle minutes (5 to 10080); null: never.",
    )


def _endpoint(request, endpoint):
    return EndpointSerializer(endpoint, context={"request": request}).data


@extend_schema(tags=["inference"])
class TemplateListView(APIView):
    @extend_schema(summary="Inference templates", responses=TemplateSerializer(many=True))
    def get(self, request):
        context = {"node_backends": inference.node_backends(), "chips": list(Chip.objects.offered())}
        return Response(TemplateSerializer(inference.templates(), many=True, context=context).data)


@extend_schema(tags=["inference"])
class EndpointListView(APIView):
    team_scoped = True  # a team's token lists and deploys the team's endpoints

    @extend_schema(summary="Your endpoints", responses=EndpointSerializer(many=True))
    def get(self, request):
        rows = endpoints.endpoints_of(account_for(request))
        return Response([_endpoint(request, e) for e in rows])

    @extend_schema(
        summary="Deploy a template as an endpoint (the first key is returned once)",
        request=DeploySerializer,
        responses={201: EndpointSerializer},
    )
    def post(self, request):
        data = DeploySerializer(data=request.data)
        data.is_valid(raise_exception=True)
        account = account_for(request)
        endpoint = endpoints.deploy(account, endpoints.DeployRequest(**data.validated_data), by=request.user)
        record(endpoint.instance, request.user, TeamEvent.Action.LAUNCHED, subject=endpoint.instance.name)
        issued = endpoints.create_key(endpoint, name="default", by=request.user)
        body = _endpoint(request, endpoint) | {"key": issued.plaintext}
        return Response(body, status=status.HTTP_201_CREATED)


def _get(request, id, action="view"):
    return endpoints.get_endpoint(request.user, id, action)


@extend_schema(tags=["inference"])
class EndpointDetailView(APIView):
    team_scoped = True  # the ownership filter keeps a team's token to the team's endpoints

    @extend_schema(summary="An endpoint with its keys and request totals", responses=EndpointSerializer)
    def get(self, request, id):
        endpoint = _get(request, id)
        body = _endpoint(request, endpoint) | {
            "keys": KeySerializer(endpoint.keys.all(), many=True).data,
            "totals": endpoints.totals(endpoint),
        }
        return Response(body)

    @extend_schema(summary="Release the endpoint", responses={202: EndpointSerializer})
    def delete(self, request, id):
        endpoint = _get(request, id, "change")
        lifecycle.release(endpoint.instance)
        record(endpoint.instance, request.user, TeamEvent.Action.RELEASED, subject=endpoint.instance.name)
        return Response(_endpoint(request, endpoint), status=status.HTTP_202_ACCEPTED)


def _acted(request, endpoint, event: str) -> Response:
    """The answer to a stop or a start, written into the team's audit log when a team owns the endpoint."""
    record(endpoint.instance, request.user, event, subject=endpoint.instance.name)
    return Response(_endpoint(request, endpoint), status=status.HTTP_202_ACCEPTED)


class EndpointStopView(APIView):
    team_scoped = True

    @extend_schema(tags=["inference"], request=None, responses={202: EndpointSerializer})
    def post(self, request, id):
        endpoint = _get(request, id, "change")
        lifecycle.stop(endpoint.instance)
        return _acted(request, endpoint, TeamEvent.Action.STOPPED)


class EndpointStartView(APIView):
    team_scoped = True

    @extend_schema(tags=["inference"], request=None, responses={202: EndpointSerializer})
    def post(self, request, id):
        endpoint = _get(request, id, "change")
        lifecycle.start(endpoint.instance, by=request.user)
        return _acted(request, endpoint, TeamEvent.Action.STARTED)


class KeyCreateSerializer(strict.Serializer):
    name = serializers.CharField(max_length=64, required=False, allow_blank=True, default="")


@extend_schema(tags=["inference"])
class KeyListView(APIView):
    team_scoped = True

    @extend_schema(summary="The endpoint's keys", responses=KeySerializer(many=True))
    def get(self, request, id):
        return Response(KeySerializer(_get(request, id).keys.all(), many=True).data)

    @extend_schema(
        summary="Create a key (the plaintext is returned once)",
        request=KeyCreateSerializer,
        responses={201: KeySerializer},
    )
    def post(self, request, id):
        data = KeyCreateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        issued = endpoints.create_key(_get(request, id, "change"), name=data.validated_data["name"], by=request.user)
        return Response(KeySerializer(issued.key).data | {"key": issued.plaintext}, status=status.HTTP_201_CREATED)


@extend_schema(tags=["inference"])
class KeyDetailView(APIView):
    team_scoped = True

    @extend_schema(summary="Revoke a key", responses={200: KeySerializer})
    def delete(self, request, id, key_id):
        key = endpoints.revoke_key(_get(request, id, "change"), key_id)
        return Response(KeySerializer(key).data)


urlpatterns = [
    re_path(r"^inference-templates/?$", TemplateListView.as_view(), name="api-inference-templates"),
    re_path(r"^endpoints/?$", EndpointListView.as_view(), name="api-endpoints"),
    re_path(r"^endpoints/(?P<id>[^/]+)/stop/?$", EndpointStopView.as_view(), name="api-endpoint-stop"),
    re_path(r"^endpoints/(?P<id>[^/]+)/start/?$", EndpointStartView.as_view(), name="api-endpoint-start"),
    re_path(r"^endpoints/(?P<id>[^/]+)/keys/?$", KeyListView.as_view(), name="api-endpoint-keys"),
    re_path(r"^endpoints/(?P<id>[^/]+)/keys/(?P<key_id>[^/]+)/?$", KeyDetailView.as_view(), name="api-endpoint-key"),
    re_path(r"^endpoints/(?P<id>[^/]+)/?$", EndpointDetailView.as_view(), name="api-endpoint"),
]
