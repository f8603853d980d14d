"""Who may reach what a team owns: the one ownership filter every queryset of team-ownable objects uses.

A person reaches their own objects, and the objects of each team they belong to whose role allows the action:
``view`` needs the VIEW permission, anything else (``change``, ``delete``…) OPERATE. The filter is a subquery, so a
page lists team objects with no extra query.
"""

from django.db.models import Q
from django.utils.translation import gettext as _

from core.errors import Forbidden

from . import roles
from .models import Membership, Team

VIEW_ACTIONS = frozenset({"view"})


def permission_for(action: str) -> str:
    return roles.VIEW if action in VIEW_ACTIONS else roles.OPERATE


def roles_allowed(permission: str) -> list[str]:
    return [role for role, granted in roles.PERMISSIONS.items() if permission in granted]


def account_ids(user, action: str = "view"):
    """The ids of the team accounts whose objects ``user`` may ``action`` (a subquery)."""
    permission = permission_for(action)
    return Team.objects.filter(memberships__user=user, memberships__role__in=roles_allowed(permission)).values(
        "account_id"
    )


def _team_accounts(user, action: str):
    """The team accounts ``user`` may ``action`` the objects of (a subquery): through a team's API token, only that
    team's."""
    team_id = getattr(user, "token_team_id", None)
    accounts = account_ids(user, action)
    return accounts if team_id is None else accounts.filter(pk=team_id)


def _own_reachable(user) -> bool:
    """Whether the person's own objects are theirs here: not through a team's API token."""
    return getattr(user, "token_team_id", None) is None


def owned(user, action: str = "view", field: str = "owner") -> Q:
    """``field`` is ``user``, or the account of a team ``user`` may ``action`` the objects of. Through a team's API
    token, only that team's account (and only while the person's role allows it)."""
    teams = Q(**{f"{field}__in": _team_accounts(user, action)})
    return Q(**{field: user}) | teams if _own_reachable(user) else teams


def reaches(user, account_id, action: str = "view") -> bool:
    """Whether :func:`owned` admits an object of ``account_id`` already read: the person's own with no query, a
    team's by one (the same subquery)."""
    if not getattr(user, "is_authenticated", False):
        return False
    if _own_reachable(user) and account_id == user.pk:
        return True
    return _team_accounts(user, action).filter(account_id=account_id).exists()


def refuse(user, account) -> None:  # account: a user or its id
    """Raise Forbidden naming the team and the person's role: they may see ``account``'s object, not do this."""
    account_id = getattr(account, "pk", account)
    member = Membership.objects.select_related("team").filter(user=user, team__account_id=account_id).first()
    if member is None:
        return
    raise Forbidden(
        _("Your role in %(team)s (%(role)s) does not allow this.")
        % {"team": member.team.name, "role": member.get_role_display()}
    )


def refuse_if_seen(user, queryset, action: str, *conditions, field: str = "owner", **lookup) -> None:
    """After a lookup for ``action`` found nothing: when ``user`` may still see the object (a team role that may
    only look), say so with :func:`refuse` (403) rather than the 404 of a missing object. Nothing otherwise."""
    if action in VIEW_ACTIONS or not getattr(user, "is_authenticated", False):
        return
    seen = queryset.filter(owned(user, "view", field), *conditions, **lookup).values_list(field, flat=True).first()
    if seen is not None:
        refuse(user, seen)
