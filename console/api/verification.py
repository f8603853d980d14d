"""``/api/v1/enterprise-verification``: the caller's enterprise verification — apply (POST), see the status and a
rejection's reason (GET)."""

from django.utils.translation import gettext as _
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import NotFound
from rest_framework.response import Response
from rest_framework.views import APIView

from .. import verification
from ..models import EnterpriseVerification


class EnterpriseVerificationSerializer(serializers.ModelSerializer):
    id = serializers.UUIDField(source="public_id", read_only=True)
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
        extra_kwargs = {"licence_number": {"max_length": 24}}


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
