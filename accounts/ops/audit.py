"""The audit log's one writer. Every staff action calls :func:`record` inside the transaction of its change, so
the row exists exactly when the change does."""

from dataclasses import dataclass
from decimal import Decimal

from django.core.serializers.json import DjangoJSONEncoder

from .models import AuditEntry


@dataclass(frozen=True)
class Actor:
    """Who acts, and from where: the staff user and the request's IP address (None outside a request)."""

    user: object
    ip: str | None = None

    @classmethod
    def from_request(cls, request) -> "Actor":
        return cls(user=request.user, ip=client_ip(request))


def client_ip(request) -> str | None:
    # REMOTE_ADDR, not X-Forwarded-For: a client can write that header, and the proxy in front sets REMOTE_ADDR
    # correctly when it is configured to (the audit must not record what the client claims).
    return request.META.get("REMOTE_ADDR") or None


def _plain(value):
    """JSON-safe values: Decimals as strings (never floats), dates in ISO 8601, sets as sorted lists."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        items = [_plain(v) for v in value]
        return sorted(items, key=str) if isinstance(value, (set, frozenset)) else items
    if isinstance(value, Decimal):
        return str(value)
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return DjangoJSONEncoder().default(value)


def record(actor: Actor, action: str, target, *, before=None, after=None, reason: str = "") -> AuditEntry:
    """Write one audit row: ``actor`` did ``action`` to ``target`` (a ``Target`` or a model instance)."""
    target = target if isinstance(target, Target) else Target.of(target)
    user = actor.user if getattr(actor.user, "is_authenticated", False) else None
    return AuditEntry.objects.create(
        actor=user,
        actor_email=getattr(user, "email", "") or "",
        action=action,
        target_type=target.type,
        target_id=str(target.id)[:64],
        target_label=str(target.label)[:255],
        before=_plain(before or {}),
        after=_plain(after or {}),
        reason=(reason or "")[:500],
        ip=actor.ip,
    )


@dataclass(frozen=True)
class Target:
    """What an action was done to: a type name, its public id (UUID, slug or name) and a readable label."""

    type: str
    id: str
    label: str = ""

    @classmethod
    def of(cls, obj) -> "Target":
        kind = obj._meta.model_name
        public = getattr(obj, "public_id", None) or getattr(obj, "slug", None) or obj.pk
        return cls(type=kind, id=str(public), label=str(obj))
