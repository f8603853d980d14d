"""/api/v1/secrets: the caller's secrets by name. Values go in (POST, PUT) and never come out."""

from functools import partial

from django.utils.translation import gettext_lazy as _
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.response import Response

from core.api import strict
from core.api.errors import ErrorSerializer
from core.api.validators import Pattern, RequiredText

from .. import secrets
from ..environment_variables import MAX_NAME_LENGTH, NAME_PATTERN, check_name
from ..models import Secret


class SecretSerializer(strict.ModelSerializer):
    """A secret as the API shows it: its name and when it changed, never its value."""

    class Meta:
        model = Secret
        fields = ["name", "created_at", "updated_at"]
        read_only_fields = fields


def _value_field():
    return RequiredText(
        write_only=True,
        trim_whitespace=False,
        empty_message=_("Give the secret a value."),
        empty_code="value_required",
        help_text="The value (at most 32 KB of text), taken as sent: kept encrypted and never shown again.",
    )


class SecretCreateSerializer(strict.Serializer):
    name = serializers.CharField(
        max_length=MAX_NAME_LENGTH,
        validators=[Pattern(rf"^{NAME_PATTERN.pattern}$", refuse=partial(check_name, field="name"))],
        help_text="The environment variable it becomes: letters, digits and underscores, not a digit first.",
    )
    value = _value_field()


class SecretValueSerializer(strict.Serializer):
    value = _value_field()


# A secret's name is a variable name: what is not is no secret's (a 404), and PUT cannot create it (a 400).
NAME_PARAMETER = OpenApiParameter(
    "name", str, OpenApiParameter.PATH, pattern=rf"^{NAME_PATTERN.pattern}$", description="The secret's name."
)

ERRORS = {
    400: OpenApiResponse(ErrorSerializer, description="Bad name or value, with a message saying what to change."),
    404: OpenApiResponse(ErrorSerializer, description="No such secret."),
}


@extend_schema(tags=["secrets"])
@extend_schema_view(
    list=extend_schema(summary="Your secrets: names and when they changed, never values"),
    retrieve=extend_schema(
        summary="One secret's name and dates (never its value)",
        parameters=[NAME_PARAMETER],
        responses={200: SecretSerializer, 404: ERRORS[404]},
    ),
    update=extend_schema(parameters=[NAME_PARAMETER]),
    destroy=extend_schema(parameters=[NAME_PARAMETER]),
)
class SecretViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    serializer_class = SecretSerializer
    lookup_field = "name"
    lookup_value_regex = "[^/]+"
    http_method_names = ["get", "post", "put", "delete", "head", "options"]

    def get_queryset(self):
        return Secret.objects.for_user(self.request.user)

    def get_object(self):
        return secrets.get_secret(self.request.user, self.kwargs["name"])

    @extend_schema(
        summary="Save a new secret (a name you already use: 409, replace it with PUT)",
        request=SecretCreateSerializer,
        responses={201: SecretSerializer, **ERRORS, 409: OpenApiResponse(ErrorSerializer, description="Name taken.")},
    )
    def create(self, request):
        body = SecretCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        secret = secrets.create_secret(request.user, body.validated_data["name"], body.validated_data["value"])
        return Response(SecretSerializer(secret).data, status=status.HTTP_201_CREATED)

    @extend_schema(
        summary="Set a secret's value, creating it if need be; instances get it at their next boot",
        request=SecretValueSerializer,
        responses={200: SecretSerializer, 201: SecretSerializer, **ERRORS},
    )
    def update(self, request, name=None):
        body = SecretValueSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        secret, created = secrets.put_secret(request.user, self.kwargs["name"], body.validated_data["value"])
        return Response(
            SecretSerializer(secret).data, status=status.HTTP_201_CREATED if created else status.HTTP_200_OK
        )

    @extend_schema(
        summary="Delete a secret; instances that name it boot without it from now on", responses={204: None, **ERRORS}
    )
    def destroy(self, request, name=None):
        secrets.delete_secret(request.user, self.kwargs["name"])
        return Response(status=status.HTTP_204_NO_CONTENT)
