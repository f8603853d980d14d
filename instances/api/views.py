"""Public catalog endpoints: chips, zones, specs and the training estimate. No login needed."""

from dataclasses import dataclass

from django.utils.translation import gettext as _
from drf_spectacular.utils import extend_schema
from rest_framework import viewsets
from rest_framework.permissions import AllowAny
from rest_framework.response import Response
from rest_framework.views import APIView

from billing import estimator
from billing.quote import load_price_book
from catalog import services as catalog_services
from catalog.models import Chip, InstanceSpec, Zone
from core.errors import ServiceError
from core.field_errors import FieldError

from .serializers import (
    ChipSerializer,
    InstanceSpecSerializer,
    TrainingEstimateQuerySerializer,
    TrainingEstimateSerializer,
    ZoneSerializer,
    not_published_message,
)


class PublicCatalogMixin:
    permission_classes = [AllowAny]
    lookup_field = "slug"

    def get_queryset(self):
        return self.queryset.for_user(self.request.user, "view")


@extend_schema(tags=["catalog"])
class ChipViewSet(PublicCatalogMixin, viewsets.ReadOnlyModelViewSet):
    """Chips with their published figures (null: not published)."""

    queryset = Chip.objects.with_figures()
    serializer_class = ChipSerializer


@extend_schema(tags=["catalog"])
class ZoneViewSet(PublicCatalogMixin, viewsets.ReadOnlyModelViewSet):
    """Zones with the chips they offer and their capacity in cards."""

    queryset = Zone.objects.active().select_related("region")
    serializer_class = ZoneSerializer

    def get_serializer_context(self):
        context = super().get_serializer_context()
        offers_by_zone: dict[int, list] = {}
        for chip_offers in catalog_services.zone_offers().values():
            for offer in chip_offers:
                offers_by_zone.setdefault(offer.zone.pk, []).append(offer)
        context["offers_by_zone"] = offers_by_zone
        context["chip_slugs"] = dict(Chip.objects.values_list("pk", "slug"))
        return context


@extend_schema(tags=["catalog"])
class InstanceSpecViewSet(PublicCatalogMixin, viewsets.ReadOnlyModelViewSet):
    """Instance specs: chip × 1/2/4/8 cards, and the CPU-only no-card mode (chip null, 0 cards)."""

    queryset = InstanceSpec.objects.active().with_chip()
    serializer_class = InstanceSpecSerializer


@dataclass(frozen=True)
class _EstimateView:
    """An estimate row plus the job and assumptions, shaped for the serializer."""

    row: estimator.ChipEstimate
    job: estimator.TrainingJob
    assumptions: dict

    def __getattr__(self, name):
        return getattr(self.row, name)


class TrainingEstimateView(APIView):
    permission_classes = [AllowAny]

    @extend_schema(
        tags=["catalog"],
        parameters=[TrainingEstimateQuerySerializer],
        responses={200: TrainingEstimateSerializer},
        summary="Estimate a training run on one chip",
        description="6·N·D FLOPs over cards × peak × MFU × scaling efficiency; the cost comes from the quote "
        "function (cheapest plan without spot, after subsidies). Without `cards` the estimator picks the count.",
    )
    def get(self, request):
        query = TrainingEstimateQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        data = query.validated_data
        try:
            chip = catalog_services.get_chip(data["chip"])
        except ServiceError as exc:  # an unknown chip: 404 unknown_chip
            raise FieldError("chip", exc.message, code=exc.code, status=exc.status) from exc
        if not chip.rentable:
            raise FieldError(
                "chip",
                _("%(chip)s is shown for comparison only and cannot be rented.") % {"chip": chip.label},
                code="not_rentable",
            )
        job = estimator.TrainingJob(
            params_b=data["params_b"],
            tokens_b=data["tokens_b"],
            deadline_days=data.get("deadline_days"),
            budget_cny=data.get("budget_cny"),
        )
        chip = Chip.objects.with_figures().get(pk=chip.pk)
        row = estimator.estimate_chip(job, chip, cards=data.get("cards"), book=load_price_book(user=request.user))
        if row.missing:
            raise FieldError("chip", not_published_message(chip, row.missing), code="not_published")
        if row.cards is None or row.days is None:
            raise ServiceError(row.problem, code="not_feasible")
        payload = _EstimateView(row=row, job=job, assumptions=estimator.assumptions())
        return Response(TrainingEstimateSerializer(payload).data)
