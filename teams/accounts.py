"""A team's account: the user row that owns the team's resources and holds its wallet.

Everything that bills or owns is keyed by a user, so a team gets one too. Nobody can sign in as it: its password is
unusable, its address is under the ``.invalid`` top-level domain (RFC 2606: no mail is ever delivered there) and
it has no verified e-mail address. Mail meant for it goes to the team's people instead (:func:`recipients`).
"""

import uuid

from django.contrib.auth import get_user_model

from . import roles
from .models import Team

ACCOUNT_DOMAIN = "teams.invalid"


def new_account():
    """A fresh account row for a team about to be created."""
    user = get_user_model()(email=f"team-{uuid.uuid4().hex}@{ACCOUNT_DOMAIN}", is_active=True)
    user.set_unusable_password()
    user.save()
    return user


def is_account_address(email: str) -> bool:
    """Whether ``email`` is the address of a team's account."""
    return (email or "").endswith("@" + ACCOUNT_DOMAIN)


def is_account(user) -> bool:
    """Whether ``user`` is a team's account, known from its address (no query)."""
    return bool(user is not None and getattr(user, "pk", None) and is_account_address(user.email))


def team_of(user):
    """The team ``user`` is the account of, or None for a person (known from the address: no query for one)."""
    if not is_account(user):
        return None
    try:
        return user.team_account
    except user.__class__.team_account.RelatedObjectDoesNotExist:
        return None


def recipients(user) -> list[str]:
    """Where mail about ``user``'s wallet goes: the person's address, or for a team the addresses of the members
    whose role covers billing."""
    team = team_of(user)
    if team is None:
        return [user.email]
    billing_roles = [role for role, granted in roles.PERMISSIONS.items() if roles.BILLING in granted]
    return list(team.memberships.filter(role__in=billing_roles).order_by("id").values_list("user__email", flat=True))


def team_name(account_id: int) -> str:
    return Team.objects.filter(account_id=account_id).values_list("name", flat=True).first() or ""


def member_email(user_id: int) -> str:
    return get_user_model().objects.filter(pk=user_id).values_list("email", flat=True).first() or ""
