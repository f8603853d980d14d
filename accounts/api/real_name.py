"""``/api/v1/real-name``: the caller's real-name verification — verify (POST), see it, masked (GET)."""

from django.utils.decorators import method_decorator
from django.utils.translation import gettext as _
from django.views.decorators.debug import sensitive_variables
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_field
from rest_framework import serializers, status
from rest_framework.exceptions import NotFound
from rest_framework.response import Response
from rest_framework.views import APIView

from core.api import strict
from core.api.schema import named_format
from core.api.validators import Pattern

from .. import identity


@named_format(identity.NUMBER_FORMAT, "A mainland ID number: 17 digits and a check digit or X (spaces are dropped).")
class IdNumberField(serializers.CharField):
    """A mainland ID number: 17 digits and a check digit or X, with a region and a date of birth (``clean_number``
    checks them)."""


# The pattern as it is, its CJK ranges as characters: drf-spectacular would write a validator's astral range as
# Python's \U escapes, which an ECMA pattern does not have.
@extend_schema_field({"type": "string", "pattern": identity.NAME_AS_TYPED, "minLength": 1})
class RealNameField(serializers.CharField):
    """A name as on an ID card (``clean_name`` checks it)."""


class RealNameRequestSerializer(strict.Serializer):
    real_name = RealNameField(  # no max_length: the pattern counts the name's parts once spaces are folded
        validators=[Pattern(identity.NAME_AS_TYPED, refuse=identity.clean_name)],
        help_text="As on the ID card: Chinese characters, Latin letters, spaces and · . ' -",
    )
    number = IdNumberField(
        max_length=30,
        write_only=True,
        validators=[Pattern(identity.NUMBER_AS_TYPED, refuse=identity.clean_number)],
        help_text="The 18-character mainland ID number.",
    )


class RealNameSerializer(strict.Serializer):
    name = serializers.CharField(source="masked_name", help_text="Masked: the first character only.")
    number = serializers.CharField(source="masked_number", help_text="Masked: the last four characters only.")
    document = serializers.CharField()
    verified_at = serializers.DateTimeField()


class RealNameView(APIView):
    @extend_schema(
        tags=["account"],
        responses={200: RealNameSerializer, 404: OpenApiResponse(description="Not verified yet.")},
    )
    def get(self, request):
        verified = identity.status(request.user)
        if verified is None:
            raise NotFound(_("Your account is not verified yet."))
        return Response(RealNameSerializer(verified).data)

    @extend_schema(tags=["account"], request=RealNameRequestSerializer, responses={201: RealNameSerializer})
    @method_decorator(sensitive_variables())
    def post(self, request):
        serializer = RealNameRequestSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        verified = identity.verify(request.user, **serializer.validated_data)
        return Response(RealNameSerializer(verified).data, status=status.HTTP_201_CREATED)
