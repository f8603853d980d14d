"""Teams over the API: list and create, one team's members, invite, accept an invitation, change a role, remove.

Every call checks the caller's membership first (404 outside the team) and the role in the service (403)."""

from django.db import transaction
from django.utils.translation import gettext as _
from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.response import Response
from rest_framework.views import APIView

from core.errors import NotFound

from .. import roles, services
from .serializers import (
    AcceptSerializer,
    InvitationRequestSerializer,
    InvitationSerializer,
    MemberChangeSerializer,
    MemberSerializer,
    MembershipSerializer,
    TeamCreateSerializer,
    TeamDetailSerializer,
)


def _valid(serializer_class, request):
    serializer = serializer_class(data=request.data)
    serializer.is_valid(raise_exception=True)
    return serializer.validated_data


def _membership(request, slug):
    """The caller's membership of ``slug``; through a team's token only that team (another is the same 404 as one
    the person is not in)."""
    token_team = getattr(request.auth, "team_id", None)
    member = services.membership(request.user, slug)
    if token_team is not None and member.team_id != token_team:
        raise NotFound(_("No such team."))
    return member


class TeamListView(APIView):
    # A team's token is for its own team: it neither lists the person's teams, creates one nor joins another.

    @extend_schema(tags=["teams"], responses={200: MembershipSerializer(many=True)}, summary="Your teams")
    def get(self, request):
        return Response(MembershipSerializer(services.teams_of(request.user), many=True).data)

    @extend_schema(tags=["teams"], request=TeamCreateSerializer, responses={201: MembershipSerializer})
    def post(self, request):
        team = services.create_team(request.user, **_valid(TeamCreateSerializer, request))
        return Response(MembershipSerializer(services.membership(request.user, team.slug)).data, status=201)


class TeamDetailView(APIView):
    team_scoped = True  # a team's token reaches its own team only (_membership)

    @extend_schema(
        tags=["teams"],
        responses={200: TeamDetailSerializer},
        summary="A team and its members",
        operation_id="teams_retrieve",
    )
    def get(self, request, slug):
        member = _membership(request, slug)
        member.team_members = list(member.team.memberships.select_related("user").order_by("joined_at", "id"))
        if not roles.can(member.role, roles.BILLING):
            # Budgets are the billing roles' business: others see their own only.
            for other in member.team_members:
                if other.user_id != request.user.pk:
                    other.monthly_budget = None
        return Response(TeamDetailSerializer(member).data)


class InvitationView(APIView):
    team_scoped = True  # a team's token reaches its own team only (_membership)

    @extend_schema(tags=["teams"], request=InvitationRequestSerializer, responses={201: InvitationSerializer})
    def post(self, request, slug):
        member = _membership(request, slug)
        data = _valid(InvitationRequestSerializer, request)
        invitation = services.invite(member, data["email"], data["role"])
        return Response(InvitationSerializer(invitation).data, status=status.HTTP_201_CREATED)


class AcceptView(APIView):
    # A team's token is for its own team: it neither lists the person's teams, creates one nor joins another.

    @extend_schema(tags=["teams"], request=AcceptSerializer, responses={200: MembershipSerializer})
    def post(self, request):
        joined = services.accept(request.user, _valid(AcceptSerializer, request)["token"])
        return Response(MembershipSerializer(joined).data)


class MemberView(APIView):
    team_scoped = True  # a team's token reaches its own team only (_membership)

    @extend_schema(
        tags=["teams"],
        request=MemberChangeSerializer,
        responses={200: MemberSerializer},
        summary="Change a member's role (members permission) or monthly budget (billing permission)",
    )
    def patch(self, request, slug, user_id):
        member = _membership(request, slug)
        data = _valid(MemberChangeSerializer, request)
        with transaction.atomic():  # both or neither
            changed = None
            if "role" in data:
                changed = services.change_role(member, user_id, data["role"])
            if "monthly_budget" in data:
                changed = services.set_budget(member, user_id, data["monthly_budget"])
        return Response(MemberSerializer(changed).data)

    @extend_schema(tags=["teams"], responses={204: None}, summary="Remove a member, or leave with your own id")
    def delete(self, request, slug, user_id):
        services.remove_member(_membership(request, slug), user_id)
        return Response(status=status.HTTP_204_NO_CONTENT)
