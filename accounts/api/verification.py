"""``/api/v1/enterprise-verification``: the caller's enterprise verification — apply (POST), see the status and a
rejection's reason (GET)."""

from django.utils.translation import gettext as _
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import NotFound
from rest_framework.response import Response
from rest_framework.views import APIView

from core.api import strict
from core.api.schema import named_format
from core.api.validators import Pattern

from .. import verification
from ..models import EnterpriseVerification


@named_format(
    verification.CREDIT_CODE_FORMAT,
    "A unified social credit code: 18 digits and capitals without I, O, S, V or Z, the last a check character "
    "(spaces and dashes are dropped).",
)
class CreditCodeField(serializers.CharField):
    """A unified social credit code: 18 digits and capitals without I, O, S, V or Z, the last a check character
    (``clean_licence_number`` checks it)."""


class EnterpriseVerificationSerializer(strict.ModelSerializer):
    id = serializers.UUIDField(source="public_id", read_only=True)
    licence_number = CreditCodeField(
        max_length=24, validators=[Pattern(verification.CREDIT_CODE_AS_TYPED, refuse=verification.clean_licence_number)]
    )
    contact_phone = serializers.CharField(
        max_length=32,
        validators=[Pattern(verification.PHONE.pattern, refuse=verification.check_phone)],
        help_text="Digits, spaces and dashes, e.g. 010-12345678 or 13800138000.",
    )
    # A plain string in the schema: an enum named "status" would collide with the instances' and images' enums.
    status = serializers.CharField(read_only=True, help_text="pending, approved or rejected")

    class Meta:
        model = EnterpriseVerification
        fields = [
            "id",
            "company_name",
            "licence_number",
            "contact_name",
            "contact_phone",
            "status",
            "reason",
            "submitted_at",
            "reviewed_at",
        ]
        read_only_fields = ["id", "status", "reason", "submitted_at", "reviewed_at"]


class EnterpriseVerificationView(APIView):
    @extend_schema(
        responses={
            200: EnterpriseVerificationSerializer,
            404: OpenApiResponse(description="You have not applied for enterprise verification."),
        }
    )
    def get(self, request):
        application = verification.current(request.user)
        if application is None:
            raise NotFound(_("You have not applied for enterprise verification."))
        return Response(EnterpriseVerificationSerializer(application).data)

    @extend_schema(request=EnterpriseVerificationSerializer, responses={201: EnterpriseVerificationSerializer})
    def post(self, request):
        serializer = EnterpriseVerificationSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        application = verification.apply(request.user, **serializer.validated_data)
        return Response(EnterpriseVerificationSerializer(application).data, status=status.HTTP_201_CREATED)
