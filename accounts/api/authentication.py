"""Token authentication with the console's own API tokens: ``Authorization: Bearer gpc_…``."""

from django.utils.translation import gettext_lazy as _
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions

from .. import tokens


class ApiTokenAuthentication(authentication.BaseAuthentication):
    keywords = ("bearer", "token")

    def authenticate(self, request):
        header = authentication.get_authorization_header(request).decode("latin-1", "replace").split()
        if not header or header[0].lower() not in self.keywords:
            return None
        if len(header) != 2:
            raise exceptions.AuthenticationFailed(_("Malformed Authorization header: use “Bearer <token>”."))
        token = tokens.authenticate_token(header[1])
        if token is None:
            raise exceptions.AuthenticationFailed(_("Invalid or revoked API token."))
        user = token.user
        if (
            token.team_id is not None
            and not type(token).objects.filter(pk=token.pk, team__memberships__user_id=user.pk).exists()
        ):
            # A team's token stops working the moment its person leaves the team, on every route.
            raise exceptions.AuthenticationFailed(_("This API token is for a team you are no longer a member of."))
        # A team's token: the ownership filter (teams.access) reaches that team's objects and nothing personal.
        user.token_team_id = token.team_id
        return user, token

    def authenticate_header(self, request):
        return 'Bearer realm="api"'


class ApiTokenScheme(OpenApiAuthenticationExtension):
    target_class = "accounts.api.authentication.ApiTokenAuthentication"
    name = "ApiToken"

    def get_security_definition(self, auto_schema):
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "An API token from the console's API tokens page (gpc_…).",
        }
