"""Account operations: API tokens, the e-mail verification hook, worker heartbeats and health."""

import logging
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import DatabaseError, IntegrityError, connection, transaction
from django.db.models import F
from django.utils import timezone
from django.utils.translation import gettext as _

from . import keys
from .errors import NotFound, ServiceError
from .models import ApiToken, WorkerHeartbeat
from .validators import clean_display_name

log = logging.getLogger(__name__)

TOKEN_PREFIX = "gpc_"
MAX_TOKENS_PER_USER = 50
# Writing last_used_at on every request would turn each API read into a write; once a minute is enough to
# tell a user which token is still in use.
LAST_USED_RESOLUTION = timedelta(minutes=1)


@dataclass(frozen=True)
class IssuedToken:
    token: ApiToken
    plaintext: str


def create_api_token(user, *, name: str, scope: str) -> IssuedToken:
    """Issue a token; the plaintext is returned once and never stored."""
    trimmed = name.strip() if isinstance(name, str) else ""
    if not trimmed:
        raise ServiceError(_("Give the token a name."), code="name_required")
    if len(trimmed) > 64:
        raise ServiceError(_("The token name can be at most 64 characters."), code="name_too_long")
    name = clean_display_name(name, max_length=64, field_label=_("API token"))
    if scope not in ApiToken.Scope.values:
        raise ServiceError(_("Unknown scope: choose read or read_write."), code="invalid_scope")
    if ApiToken.objects.for_user(user).active().count() >= MAX_TOKENS_PER_USER:
        raise ServiceError(
            _("You can have at most %(n)d active tokens; revoke one first.") % {"n": MAX_TOKENS_PER_USER},
            code="too_many_tokens",
        )
    issued = keys.issue(
        lambda prefix, digest: ApiToken.objects.create(
            user=user, name=name, scope=scope, prefix=prefix, token_hash=digest
        ),
        prefix=TOKEN_PREFIX, hex_bytes=4, separator="_",
    )  # fmt: skip
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


def on_email_verified(user, email: str) -> None:
    """Called once an address is confirmed: grants the trial credit (once per address and per user)."""
    from billing.wallet import grant_trial_credit

    log.info("e-mail verified", extra={"user": user.pk, "email": email})
    grant_trial_credit(user, email)


def record_heartbeat(hostname: str) -> None:
    now = timezone.now()
    updated = WorkerHeartbeat.objects.filter(hostname=hostname).update(beat_at=now, beats=F("beats") + 1)
    if not updated:
        try:
            with transaction.atomic():
                WorkerHeartbeat.objects.create(hostname=hostname, beat_at=now, beats=1)
        except IntegrityError:  # another process created it first
            WorkerHeartbeat.objects.filter(hostname=hostname).update(beat_at=now, beats=F("beats") + 1)


def _check_database() -> dict:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        return {"ok": True, "vendor": connection.vendor}
    except DatabaseError as exc:
        return {"ok": False, "vendor": connection.vendor, "error": str(exc)}


def _check_broker() -> dict:
    from config.celery import app

    url = settings.CELERY_BROKER_URL
    transport = url.split("://", 1)[0]
    try:
        with app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, timeout=2)
        return {"ok": True, "transport": transport}
    except Exception as exc:  # kombu raises many kinds; any of them means the broker is unreachable
        return {"ok": False, "transport": transport, "error": str(exc)}


def _check_worker() -> dict:
    latest = WorkerHeartbeat.objects.order_by("-beat_at").first()
    if latest is None:
        return {"ok": False, "last_heartbeat": None, "error": "no worker has reported yet"}
    age = (timezone.now() - latest.beat_at).total_seconds()
    return {
        "ok": age <= settings.WORKER_HEARTBEAT_STALE_SECONDS,
        "last_heartbeat": latest.beat_at.isoformat(),
        "age_seconds": round(age, 1),
        "hostname": latest.hostname,
    }


def health_report() -> dict:
    database = _check_database()
    report = {"database": database, "broker": _check_broker()}
    report["worker"] = _check_worker() if database["ok"] else {"ok": False, "error": "database down"}
    report["status"] = "ok" if all(part["ok"] for part in report.values()) else "degraded"
    return report
