"""API tokens: issued once in plaintext, stored hashed with a visible prefix, looked up by prefix, revocable.

Part of the shared kernel: the API's authentication reads tokens from here, and nothing here imports an app.
"""

from dataclasses import dataclass
from datetime import timedelta

from django.utils import timezone
from django.utils.translation import gettext as _

from core import keys
from core.errors import Conflict, NotFound, ServiceError
from core.validators import clean_display_name

from .models import ApiToken

TOKEN_PREFIX = "gpc_"
MAX_TOKENS_PER_USER = 50
# Writing last_used_at on every request would turn each API read into a write; once a minute is enough to
# tell a user which token is still in use.
LAST_USED_RESOLUTION = timedelta(minutes=1)


@dataclass(frozen=True)
class IssuedToken:
    token: ApiToken
    plaintext: str


def create_api_token(user, *, name: str, scope: str, team=None) -> IssuedToken:
    """Issue a token, for the person or for one of their teams (``team``, checked by the caller with
    ``teams.services.team_for_token``); the plaintext is returned once and never stored."""
    trimmed = name.strip() if isinstance(name, str) else ""
    if not trimmed:
        raise ServiceError(_("Give the token a name."), code="name_required")
    if len(trimmed) > 64:
        raise ServiceError(_("The token name can be at most 64 characters."), code="name_too_long")
    name = clean_display_name(name, max_length=64, field_label=_("API token"))
    if scope not in ApiToken.Scope.values:
        raise ServiceError(_("Unknown scope: choose read or read_write."), code="invalid_scope")
    if ApiToken.objects.for_user(user).active().count() >= MAX_TOKENS_PER_USER:
        raise Conflict(
            _("You can have at most %(n)d active tokens; revoke one first.") % {"n": MAX_TOKENS_PER_USER},
            code="too_many_tokens",
        )
    issued = keys.issue(
        lambda prefix, digest: ApiToken.objects.create(
            user=user, team=team, name=name, scope=scope, prefix=prefix, token_hash=digest
        ),
        prefix=TOKEN_PREFIX,
        hex_bytes=4,
        separator="_",
    )
    if issued is not None:
        return IssuedToken(token=issued[0], plaintext=issued[1])
    raise ServiceError(_("Could not issue a token, please try again."), code="token_collision")


def revoke_api_token(user, public_id) -> ApiToken:
    token = ApiToken.objects.for_user(user, "change").filter(public_id=public_id).first()
    if token is None:
        raise NotFound(_("No such token."))
    if token.revoked_at is None:
        token.revoked_at = timezone.now()
        token.save(update_fields=["revoked_at"])
    return token


def is_active(token_id, user) -> bool:
    """Whether the token ``token_id`` of ``user`` still works (not revoked): what a permission handed out on its
    strength (an upload address) checks when it is used."""
    return ApiToken.objects.filter(pk=token_id, user=user, revoked_at__isnull=True).exists()


def authenticate_token(plaintext: str) -> ApiToken | None:
    """The active token matching ``plaintext``, or None. Looked up by prefix, compared in constant time."""
    if not plaintext.startswith(TOKEN_PREFIX) or plaintext.count("_") < 2:
        return None
    prefix = plaintext[: len(TOKEN_PREFIX) + 8]
    token = ApiToken.objects.select_related("user").filter(prefix=prefix).first()
    if token is None or not keys.matches(token.token_hash, plaintext):
        return None
    if token.revoked_at is not None or not token.user.is_active:
        return None
    now = timezone.now()
    if token.last_used_at is None or now - token.last_used_at > LAST_USED_RESOLUTION:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        token.last_used_at = now
    return token
