"""The public quote endpoint: the same quote function as the pricing page."""

from django.utils.translation import gettext as _
from drf_spectacular.utils import extend_schema
from rest_framework.permissions import AllowAny
from rest_framework.response import Response
from rest_framework.views import APIView

from console.errors import ServiceError
from instances import services as catalog
from instances.models import InstanceSpec

from ..quote import quote
from .serializers import QuoteRequestSerializer, QuoteSerializer


def _spec(slug):
    spec = InstanceSpec.objects.active().with_chip().filter(slug=slug).first()
    if spec is None:
        raise ServiceError(_("Unknown spec “%(slug)s”.") % {"slug": slug}, code="unknown_spec")
    return spec


class QuoteView(APIView):
    """Price a run. Anonymous callers get the public price; an authenticated caller's subsidy cap is applied."""

    permission_classes = [AllowAny]

    @extend_schema(
        tags=["billing"],
        request=QuoteRequestSerializer,
        responses={200: QuoteSerializer},
        summary="Quote a price breakdown",
    )
    def post(self, request):
        serializer = QuoteRequestSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        target = {"spec": _spec(data["spec"])} if data.get("spec") else {}
        if not target:
            chip = catalog.get_chip(data["chip"]) if data.get("chip") else None
            target = {"chip": chip, "cards": data.get("cards", 1 if chip else 0)}
        result = quote(
            **target,
            zone=catalog.get_zone(data["zone"]) if data.get("zone") else None,
            plan=data["plan"],
            spot=data["spot"],
            user=request.user if request.user.is_authenticated else None,
            minutes=data.get("minutes"),
            hours=data.get("hours"),
        )
        return Response(QuoteSerializer(result).data)
