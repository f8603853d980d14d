"""Scope checks for API tokens."""

from django.utils.translation import gettext_lazy as _
from rest_framework import permissions

from ..models import ApiToken

READ_ONLY = _("This API token is read-only; create a read-write token to make changes.")
TEAM_ONLY = _(
    "This API token is for a team: it reaches the team's instances, disks, storage, endpoints, images, wallet and "
    "teams, nothing else. Use a personal token for the rest."
)


class TokenScopePermission(permissions.BasePermission):
    """A read-only token may only use safe methods; a team's token only the views that act in a team
    (``team_scoped = True``). Session (browser) requests are not limited by scope."""

    message = READ_ONLY

    def has_permission(self, request, view):
        token = request.auth
        if not isinstance(token, ApiToken):
            return True
        if token.team_id is not None and not getattr(view, "team_scoped", False):
            self.message = TEAM_ONLY
            return False
        if not token.can_write:
            self.message = READ_ONLY
            return request.method in permissions.SAFE_METHODS
        return True


class PersonalTokenPermission(permissions.BasePermission):
    """Only the team part of the scope check, for public views that show a token's person more (their private
    items, their subsidy): a team's token reaches nothing personal, so it is refused there."""

    message = TEAM_ONLY

    def has_permission(self, request, view):
        token = request.auth
        return not (
            isinstance(token, ApiToken) and token.team_id is not None and not getattr(view, "team_scoped", False)
        )
