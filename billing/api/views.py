"""Billing endpoints: the public quote (the pricing page's function), the wallet, transactions, statements, top-ups."""

from django.utils.translation import gettext as _
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.permissions import AllowAny
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.api.permissions import PersonalTokenPermission
from catalog import services as catalog_services
from catalog.models import InstanceSpec
from core.errors import NotFound
from core.paging import BothEnds
from teams import roles
from teams.context import acting
from teams.models import TeamEvent
from teams.services import record

from .. import payments, statements, vouchers, wallet
from ..models import TopUp
from ..quote import quote
from .serializers import (
    QuoteRequestSerializer,
    QuoteSerializer,
    SpendingCapSerializer,
    StatementRequestSerializer,
    StatementSerializer,
    TopUpRequestSerializer,
    TopUpSerializer,
    TransactionFilterSerializer,
    TransactionSerializer,
    VoucherListSerializer,
    VoucherRedeemSerializer,
    VoucherSerializer,
    WalletSerializer,
)


def _account(request):
    """Whose wallet: the caller's, or through a team's token the team's (the billing permission, else 403)."""
    context = acting(request)
    context.require(roles.BILLING)
    return context.account


def _spec(slug):
    spec = InstanceSpec.objects.active().with_chip().filter(slug=slug).first()
    if spec is None:
        raise NotFound(_("Unknown spec “%(slug)s”.") % {"slug": slug}, code="unknown_spec")
    return spec


class QuoteView(APIView):
    """Price a run. Anonymous callers get the public price; an authenticated caller's subsidy cap is applied."""

    permission_classes = [AllowAny, PersonalTokenPermission]

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
            chip = catalog_services.get_chip(data["chip"]) if data.get("chip") else None
            target = {"chip": chip, "cards": data.get("cards", 1 if chip else 0)}
        result = quote(
            **target,
            zone=catalog_services.get_zone(data["zone"]) if data.get("zone") else None,
            plan=data["plan"],
            spot=data["spot"],
            user=request.user if request.user.is_authenticated else None,
            minutes=data.get("minutes"),
            hours=data.get("hours"),
        )
        return Response(QuoteSerializer(result).data)


class WalletView(APIView):
    team_scoped = True  # a team's token reads and tops up the team's wallet (the billing permission)
    """The caller's balances; PATCH sets the monthly spending cap."""

    @extend_schema(tags=["billing"], responses={200: WalletSerializer}, summary="Wallet balances")
    def get(self, request):
        return Response(WalletSerializer(wallet.summary(_account(request), list_vouchers=True)).data)

    @extend_schema(tags=["billing"], request=SpendingCapSerializer, responses={200: WalletSerializer})
    def patch(self, request):
        serializer = SpendingCapSerializer(data=request.data, partial=True)
        serializer.is_valid(raise_exception=True)
        if "spending_cap" in serializer.validated_data:  # a PATCH without it changes nothing
            wallet.set_spending_cap(_account(request), serializer.validated_data["spending_cap"])
        return Response(WalletSerializer(wallet.summary(_account(request), list_vouchers=True)).data)


class VoucherView(APIView):
    team_scoped = True  # a team's token redeems into the team's wallet (the billing permission)
    """The wallet's vouchers (GET); redeem a code (POST)."""

    @extend_schema(tags=["billing"], responses={200: VoucherListSerializer}, summary="The wallet's vouchers")
    def get(self, request):
        return Response({"results": VoucherSerializer(vouchers.vouchers_of(_account(request)), many=True).data})

    @extend_schema(
        tags=["billing"],
        request=VoucherRedeemSerializer,
        responses={201: VoucherSerializer},
        summary="Redeem a voucher's code",
    )
    def post(self, request):
        body = VoucherRedeemSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        account = _account(request)
        voucher = vouchers.redeem(account, body.validated_data["code"], by=request.user)
        record(account, request.user, TeamEvent.Action.VOUCHER_REDEEMED, subject=f"¥{voucher.amount}")
        view = next(v for v in vouchers.vouchers_of(account) if v.id == str(voucher.public_id))
        return Response(VoucherSerializer(view).data, status=status.HTTP_201_CREATED)


class TransactionViewSet(mixins.ListModelMixin, viewsets.GenericViewSet):
    team_scoped = True  # a team's token reads and tops up the team's wallet (the billing permission)
    """The caller's ledger transactions, newest first; filter with ?kind=&since=&until= (dates)."""

    serializer_class = TransactionSerializer

    def get_queryset(self):
        params = TransactionFilterSerializer(data=self.request.query_params)
        params.is_valid(raise_exception=True)
        return statements.filtered_transactions(_account(self.request), **params.validated_data)

    def paginate_queryset(self, queryset):
        return super().paginate_queryset(BothEnds(queryset))

    @extend_schema(tags=["billing"], parameters=[TransactionFilterSerializer])
    def list(self, request, *args, **kwargs):
        return super().list(request, *args, **kwargs)


class StatementView(APIView):
    team_scoped = True  # a team's token reads and tops up the team's wallet (the billing permission)
    """The caller's monthly statement per resource (?month=YYYY-MM, default this month)."""

    @extend_schema(tags=["billing"], parameters=[StatementRequestSerializer], responses={200: StatementSerializer})
    def get(self, request):
        params = StatementRequestSerializer(data=request.query_params)
        params.is_valid(raise_exception=True)
        month = statements.parse_month(params.validated_data.get("month"))
        return Response(StatementSerializer(statements.month_statement(_account(request), month)).data)


class TopUpViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    team_scoped = True  # a team's token reads and tops up the team's wallet (the billing permission)
    """Top-ups: POST creates a checkout and returns its URL; the wallet is credited once the payment completes."""

    serializer_class = TopUpSerializer
    lookup_field = "public_id"
    lookup_value_regex = "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"

    def get_queryset(self):
        return TopUp.objects.for_user(_account(self.request)).order_by("-created_at")

    @extend_schema(tags=["billing"], request=TopUpRequestSerializer, responses={201: TopUpSerializer})
    def create(self, request):
        serializer = TopUpRequestSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        base_url = request.build_absolute_uri("/")
        account = _account(request)
        topup = payments.start_topup(account, serializer.validated_data["amount"], base_url=base_url, by=request.user)
        record(account, request.user, TeamEvent.Action.TOPUP_STARTED, subject=f"¥{topup.amount}")
        return Response(TopUpSerializer(topup).data, status=status.HTTP_201_CREATED)
