from django.utils.translation import gettext_lazy as _
from rest_framework import serializers

from core.api import strict
from core.api.validators import display_name

from ..models import ApiToken, User


class MeSerializer(strict.ModelSerializer):
    id = serializers.UUIDField(source="public_id", read_only=True)
    email_verified = serializers.SerializerMethodField()
    language = serializers.SerializerMethodField()

    class Meta:
        model = User
        fields = ["id", "email", "email_verified", "date_joined", "language"]
        read_only_fields = fields

    def get_email_verified(self, user) -> bool:
        return user.emailaddress_set.filter(email__iexact=user.email, verified=True).exists()

    def get_language(self, user) -> str:
        return self.context["request"].LANGUAGE_CODE


class TeamSlugField(serializers.CharField):
    """A team by its short name: the token's team on the way out, the one asked for on the way in (checked by the
    view against the caller's memberships, so a stranger's team and a missing one are the same error)."""

    def to_representation(self, value):
        return value.slug


class ApiTokenSerializer(strict.ModelSerializer):
    id = serializers.UUIDField(source="public_id", read_only=True)
    active = serializers.BooleanField(source="is_active", read_only=True)
    team = TeamSlugField(
        required=False,
        allow_null=True,
        allow_blank=True,
        max_length=40,
        help_text="The short name of the team the token acts in; null: a personal token.",
    )

    class Meta:
        model = ApiToken
        fields = ["id", "name", "scope", "team", "prefix", "created_at", "last_used_at", "revoked_at", "active"]
        read_only_fields = ["id", "prefix", "created_at", "last_used_at", "revoked_at", "active"]
        extra_kwargs = {"name": {"max_length": 64, "validators": [display_name(64, _("API token"))]}}


class IssuedTokenSerializer(ApiTokenSerializer):
    token = serializers.CharField(read_only=True, help_text="The secret, shown only in this response.")

    class Meta(ApiTokenSerializer.Meta):
        fields = [*ApiTokenSerializer.Meta.fields, "token"]
