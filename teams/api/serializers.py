from rest_framework import serializers

from core.api import strict
from core.api.validators import Pattern

from .. import services
from ..roles import Role


class TeamCreateSerializer(strict.Serializer):
    name = serializers.CharField(
        max_length=80,
        validators=[Pattern(r"^[^\x00-\x1f\x7f]+$", refuse=services.clean_team_name)],
        help_text="On one line.",
    )
    slug = serializers.CharField(
        max_length=40,
        validators=[Pattern(services.SLUG_AS_TYPED, refuse=services.clean_slug)],
        help_text="Lower-case letters, digits and hyphens, starting and ending with a letter or digit.",
    )


class MembershipSerializer(strict.Serializer):
    """A team as one of its members sees it in a list."""

    slug = serializers.CharField(source="team.slug")
    name = serializers.CharField(source="team.name")
    role = serializers.CharField()
    members = serializers.IntegerField(required=False)


class MemberSerializer(strict.Serializer):
    user_id = serializers.UUIDField(source="user.public_id")
    email = serializers.EmailField(source="user.email")
    role = serializers.CharField()
    joined_at = serializers.DateTimeField()
    monthly_budget = serializers.DecimalField(
        max_digits=12,
        decimal_places=2,
        allow_null=True,
        help_text="CNY per calendar month of the team's wallet; null: none",
    )


class InvitationRequestSerializer(strict.Serializer):
    email = serializers.CharField(max_length=254)
    role = serializers.ChoiceField(choices=Role.choices, default=Role.DEVELOPER)


class InvitationSerializer(strict.Serializer):
    id = serializers.UUIDField(source="public_id")
    email = serializers.EmailField()
    role = serializers.CharField()
    expires_at = serializers.DateTimeField()


class AcceptSerializer(strict.Serializer):
    token = serializers.CharField(max_length=500, help_text="The token at the end of the invitation link.")


class MemberChangeSerializer(strict.Serializer):
    """A new role, a new monthly budget (CNY as a string; null or "" for none), or both."""

    role = serializers.ChoiceField(choices=Role.choices, required=False)
    monthly_budget = serializers.CharField(required=False, allow_null=True, allow_blank=True, max_length=32)

    def validate(self, attrs):
        if not attrs:
            raise serializers.ValidationError("Give a role, a monthly_budget, or both.")
        return attrs


class TeamDetailSerializer(MembershipSerializer):
    """A team as one of its members sees it, with every member."""

    members = MemberSerializer(many=True, source="team_members")
