"""Scope checks for API tokens."""

from django.utils.translation import gettext_lazy as _
from rest_framework import permissions

from ..models import ApiToken


class TokenScopePermission(permissions.BasePermission):
    """A read-only token may only use safe methods. Session (browser) requests are not limited by scope."""

    message = _("This API token is read-only; create a read-write token to make changes.")

    def has_permission(self, request, view):
        token = request.auth
        if isinstance(token, ApiToken) and not token.can_write:
            return request.method in permissions.SAFE_METHODS
        return True
