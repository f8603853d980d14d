"""Account operations: the e-mail verification hook, worker heartbeats and health; API tokens live in
``accounts.tokens`` (the shared kernel) and are re-exported here."""

import logging

from django.conf import settings
from django.db import DatabaseError, IntegrityError, connection, transaction
from django.db.models import F
from django.utils import timezone

from billing.wallet import grant_trial_credit
from config.celery import app

from .models import WorkerHeartbeat
from .tokens import (  # noqa: F401  (the token operations, kept importable from here for their callers)
    LAST_USED_RESOLUTION,
    MAX_TOKENS_PER_USER,
    TOKEN_PREFIX,
    IssuedToken,
    authenticate_token,
    create_api_token,
    revoke_api_token,
)

log = logging.getLogger(__name__)


def on_email_verified(user, email: str) -> None:
    """Called once an address is confirmed: grants the trial credit (once per address and per user)."""
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
