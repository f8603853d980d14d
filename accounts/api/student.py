"""``/api/v1/student``: student verification — ask for a code at a ``.edu.cn`` address (POST), type it back
(``POST /api/v1/student/confirm``), see the status (GET)."""

from django.utils.translation import gettext as _
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import NotFound
from rest_framework.response import Response
from rest_framework.views import APIView

from core.api import strict
from core.api.validators import Pattern

from .. import students


class StudentAddressSerializer(strict.Serializer):
    email = serializers.CharField(
        max_length=254,
        validators=[Pattern(students.ADDRESS.pattern, refuse=students.clean_address)],
        help_text="A university address ending in .edu.cn.",
    )


class StudentCodeSerializer(strict.Serializer):
    code = serializers.CharField(max_length=12, help_text="The six digits mailed to the address.")


class StudentStatusSerializer(strict.Serializer):
    email = serializers.CharField(help_text="The verified address (empty until a code comes back).")
    pending_email = serializers.CharField(help_text="Where the last code went, until it comes back.")
    verified = serializers.SerializerMethodField()
    verified_at = serializers.DateTimeField(allow_null=True)
    expires_at = serializers.DateTimeField(allow_null=True, help_text="The student prices apply until then.")
    code_sent_at = serializers.DateTimeField(allow_null=True)

    def get_verified(self, row) -> bool:
        return row.is_valid()


class StudentView(APIView):
    @extend_schema(
        tags=["account"],
        responses={200: StudentStatusSerializer, 404: OpenApiResponse(description="No student verification started.")},
    )
    def get(self, request):
        row = students.status(request.user)
        if row is None:
            raise NotFound(_("You have not asked for a student verification yet."))
        return Response(StudentStatusSerializer(row).data)

    @extend_schema(
        tags=["account"],
        request=StudentAddressSerializer,
        responses={202: StudentStatusSerializer},
        summary="Mail a verification code to a .edu.cn address",
    )
    def post(self, request):
        body = StudentAddressSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        row = students.send_code(request.user, body.validated_data["email"])
        return Response(StudentStatusSerializer(row).data, status=status.HTTP_202_ACCEPTED)


class StudentConfirmView(APIView):
    @extend_schema(
        tags=["account"],
        request=StudentCodeSerializer,
        responses={200: StudentStatusSerializer},
        summary="Type back the code: verified, the student programme's prices apply",
    )
    def post(self, request):
        body = StudentCodeSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        row = students.confirm(request.user, body.validated_data["code"])
        return Response(StudentStatusSerializer(row).data)
