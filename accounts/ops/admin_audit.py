"""Audit rows for the few changes staff can still make through the Django admin's forms (prices not yet in force,
subsidy programme terms, account limits). Everything else in the admin is read-only or goes through
``backoffice.services``."""

from django.db import transaction
from django.forms.models import model_to_dict

from .audit import Actor, record
from .choices import AuditAction

ACTIONS = {
    ("price", False): AuditAction.PRICE_ADDED,
    ("price", True): AuditAction.PRICE_CHANGED,
    ("subsidyprogramme", False): AuditAction.PROGRAMME_CREATED,
    ("subsidyprogramme", True): AuditAction.PROGRAMME_CHANGED,
    ("accountlimit", False): AuditAction.ACCOUNT_LIMIT_SET,
    ("accountlimit", True): AuditAction.ACCOUNT_LIMIT_SET,
}


def _state(obj) -> dict:
    fields = [f.name for f in obj._meta.concrete_fields if f.name not in ("id", "created_at")]
    return model_to_dict(obj, fields=fields)


def audited_save(request, obj, change: bool, save) -> None:
    """Save through the admin's own ``save`` and record what changed, in one transaction."""
    before = _state(type(obj).objects.get(pk=obj.pk)) if change and obj.pk else {}
    with transaction.atomic():
        save()
        action = ACTIONS[(obj._meta.model_name, change)]
        after = _state(obj)
        changed = {k: v for k, v in after.items() if before.get(k) != v} if change else after
        record(
            Actor.from_request(request),
            action,
            obj,
            before={k: before.get(k) for k in changed} if change else {},
            after=changed,
            reason="admin",
        )


def audited_delete(request, obj, delete) -> None:
    before = _state(obj)
    with transaction.atomic():
        record(Actor.from_request(request), AuditAction.PRICE_DELETED, obj, before=before, reason="admin")
        delete()
