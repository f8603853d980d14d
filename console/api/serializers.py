from rest_framework import serializers

from ..models import ApiToken, User


class MeSerializer(serializers.ModelSerializer):
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


class ApiTokenSerializer(serializers.ModelSerializer):
    id = serializers.UUIDField(source="public_id", read_only=True)
    active = serializers.BooleanField(source="is_active", read_only=True)
    team = serializers.SlugRelatedField(
        slug_field="slug", read_only=True, help_text="The team the token acts in (give its short name to create one); "
        "null: personal."
    )  # fmt: skip

    class Meta:
        model = ApiToken
        fields = ["id", "name", "scope", "team", "prefix", "created_at", "last_used_at", "revoked_at", "active"]
        read_only_fields = ["id", "prefix", "created_at", "last_used_at", "revoked_at", "active"]


class IssuedTokenSerializer(ApiTokenSerializer):
    token = serializers.CharField(read_only=True, help_text="The secret, shown only in this response.")

    class Meta(ApiTokenSerializer.Meta):
        fields = [*ApiTokenSerializer.Meta.fields, "token"]
