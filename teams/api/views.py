"""Teams over the API: list and create, one team's members, invite, accept an invitation, change a role, remove.

Every call checks the caller's membership first (404 outside the team) and the role in the service (403)."""

from django.db import transaction
from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.response import Response
from rest_framework.views import APIView

from .. import services
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


class TeamListView(APIView):
    team_scoped = True  # teams are the person\'s: a team\'s token may read and change them as the role allows

    @extend_schema(tags=["teams"], responses={200: MembershipSerializer(many=True)}, summary="Your teams")
    def get(self, request):
        return Response(MembershipSerializer(services.teams_of(request.user), many=True).data)

    @extend_schema(tags=["teams"], request=TeamCreateSerializer, responses={201: MembershipSerializer})
    def post(self, request):
        team = services.create_team(request.user, **_valid(TeamCreateSerializer, request))
        return Response(MembershipSerializer(services.membership(request.user, team.slug)).data, status=201)


class TeamDetailView(APIView):
    team_scoped = True  # teams are the person\'s: a team\'s token may read and change them as the role allows

    @extend_schema(
        tags=["teams"], responses={200: TeamDetailSerializer}, summary="A team and its members",
        operation_id="teams_retrieve",
    )  # fmt: skip
    def get(self, request, slug):
        member = services.membership(request.user, slug)
        member.team_members = member.team.memberships.select_related("user").order_by("joined_at", "id")
        return Response(TeamDetailSerializer(member).data)


class InvitationView(APIView):
    team_scoped = True  # teams are the person\'s: a team\'s token may read and change them as the role allows

    @extend_schema(tags=["teams"], request=InvitationRequestSerializer, responses={201: InvitationSerializer})
    def post(self, request, slug):
        member = services.membership(request.user, slug)
        data = _valid(InvitationRequestSerializer, request)
        invitation = services.invite(member, data["email"], data["role"])
        return Response(InvitationSerializer(invitation).data, status=status.HTTP_201_CREATED)


class AcceptView(APIView):
    team_scoped = True  # teams are the person\'s: a team\'s token may read and change them as the role allows

    @extend_schema(tags=["teams"], request=AcceptSerializer, responses={200: MembershipSerializer})
    def post(self, request):
        joined = services.accept(request.user, _valid(AcceptSerializer, request)["token"])
        return Response(MembershipSerializer(joined).data)


class MemberView(APIView):
    team_scoped = True  # teams are the person\'s: a team\'s token may read and change them as the role allows

    @extend_schema(
        tags=["teams"],
        request=MemberChangeSerializer,
        responses={200: MemberSerializer},
        summary="Change a member's role (members permission) or monthly budget (billing permission)",
    )
    def patch(self, request, slug, user_id):
        member = services.membership(request.user, slug)
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
        services.remove_member(services.membership(request.user, slug), user_id)
        return Response(status=status.HTTP_204_NO_CONTENT)
