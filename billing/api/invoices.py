"""``/api/v1/invoices``: fapiao — what may be invoiced and the caller's requests (GET), a request (POST), and an
issued invoice's PDF (``/api/v1/invoices/{id}/pdf``). A team's token works on the team's invoices (billing roles)."""

from django.http import FileResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from core.api import strict
from core.api.ranges import amounts
from core.api.validators import Pattern

from .. import invoices
from ..models import Invoice
from .views import _account


class InvoiceSerializer(strict.ModelSerializer):
    id = serializers.UUIDField(source="public_id", read_only=True)
    amount = serializers.DecimalField(max_digits=12, decimal_places=2, coerce_to_string=True)
    kind = serializers.CharField(read_only=True, help_text="general or special")
    status = serializers.CharField(read_only=True, help_text="requested, issued, rejected or reversed")

    class Meta:
        model = Invoice
        fields = [
            "id",
            "kind",
            "title",
            "tax_id",
            "amount",
            "status",
            "number",
            "reason",
            "requested_at",
            "reviewed_at",
            "reversal_number",
            "reversed_at",
        ]


class InvoiceRequestSerializer(strict.Serializer):
    kind = serializers.ChoiceField(choices=Invoice.Kind.choices, default=Invoice.Kind.GENERAL)
    title = serializers.CharField(max_length=200)
    amount = serializers.CharField(
        max_length=20,
        validators=[Pattern(amounts(invoices.MIN_AMOUNT), refuse=invoices.check_amount)],
        help_text='CNY, at least 1, e.g. "100.00".',
    )
    tax_id = serializers.CharField(
        max_length=40,
        required=False,
        allow_blank=True,
        default="",
        validators=[Pattern(r"^\s*(?:[0-9A-Za-z]\s*){15,20}$", refuse=invoices.check_tax_id)],
        help_text="15 to 20 digits and letters (spaces are dropped, letters taken as capitals).",
    )
    address = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")
    phone = serializers.CharField(max_length=32, required=False, allow_blank=True, default="")
    bank = serializers.CharField(max_length=100, required=False, allow_blank=True, default="")
    bank_account = serializers.CharField(max_length=60, required=False, allow_blank=True, default="")


class InvoiceListSerializer(strict.Serializer):
    invoiceable = serializers.DecimalField(max_digits=12, decimal_places=2, coerce_to_string=True)
    results = InvoiceSerializer(many=True)


class InvoiceListView(APIView):
    team_scoped = True  # a team's token reads and asks for the team's invoices (the billing permission)

    @extend_schema(tags=["billing"], responses=InvoiceListSerializer, summary="What may be invoiced, and the invoices")
    def get(self, request):
        account = _account(request)
        rows = invoices.invoices_of(account)[:100]
        return Response(
            {"invoiceable": str(invoices.invoiceable(account)), "results": InvoiceSerializer(rows, many=True).data}
        )

    @extend_schema(
        tags=["billing"],
        request=InvoiceRequestSerializer,
        responses={201: InvoiceSerializer},
        summary="Ask for an invoice (at most what may be invoiced)",
    )
    def post(self, request):
        body = InvoiceRequestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        invoice = invoices.request(_account(request), **body.validated_data)
        return Response(InvoiceSerializer(invoice).data, status=status.HTTP_201_CREATED)


class InvoicePdfView(APIView):
    team_scoped = True

    @extend_schema(
        tags=["billing"], responses={(200, "application/pdf"): OpenApiTypes.BINARY}, summary="An issued invoice's PDF"
    )
    def get(self, request, public_id):
        invoice, handle = invoices.open_pdf(_account(request), public_id)
        return FileResponse(
            handle, as_attachment=True, filename=f"fapiao-{invoice.number}.pdf", content_type="application/pdf"
        )
