"""Who reaches which channel: a person's own, and a team's — seen by its members, managed by its owners and admins."""

from django.db import models
from django.db.models import Q

from teams import access, roles
from teams.models import Team


def _managed_team_accounts(user):
    """The accounts of the teams whose channels ``user`` may change: where their role manages the team (owners and
    admins). Through a team's API token, only that team's."""
    teams = Team.objects.filter(
        memberships__user=user, memberships__role__in=access.roles_allowed(roles.MEMBERS)
    ).values("account_id")
    team_id = getattr(user, "token_team_id", None)
    return teams if team_id is None else teams.filter(pk=team_id)


class ChannelQuerySet(models.QuerySet):
    def for_user(self, user, action: str = "view"):
        """Channels ``user`` may ``action``: any team member sees the team's; only its owners and admins change
        them (who is told about a team's money is the managers' decision)."""
        if not getattr(user, "is_authenticated", False):
            return self.none()
        if action in access.VIEW_ACTIONS:
            return self.filter(access.owned(user, "view"))
        teams = Q(owner__in=_managed_team_accounts(user))
        own = Q(owner=user) if getattr(user, "token_team_id", None) is None else Q(pk__in=[])
        return self.filter(own | teams)


class DeliveryQuerySet(models.QuerySet):
    def for_user(self, user, action: str = "view"):
        """The log of the channels ``user`` may see; nobody changes it but the deliveries themselves."""
        if not getattr(user, "is_authenticated", False) or action not in access.VIEW_ACTIONS:
            return self.none()
        return self.filter(access.owned(user, "view", field="channel__owner"))

    def due(self, now):
        """Pending deliveries whose next attempt is due."""
        return self.filter(status="pending", next_attempt_at__lte=now)
