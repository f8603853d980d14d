"""The price version: a token that changes whenever anything the shared part of a price book is built from changes.

``billing.quote`` keeps one shared price book per process and reuses it while the token read from the database is
the one it was built under. The token changes in the same transaction as the change itself, so a process that
sees the change sees the new token too, whichever process or worker made it:

- saving or deleting a price, plan, subsidy programme, chip, instance spec, zone, region or node (the admin, the
  seed, the services) changes it through the signals connected here; so does changing a programme's chips or zones;
- a queryset ``update()`` sends no signal, so the services that change those rows that way call :func:`bump`.

What moves with every charge (a programme's ``spent``, a node's ``cards_reserved``) is not in the shared part and
does not change the token.
"""

import uuid

from django.db import connections
from django.db.models.signals import m2m_changed, post_delete, post_migrate, post_save
from django.utils import timezone

from catalog.models import Chip, InstanceSpec, Node, Region, Zone

from .models import Plan, Price, PriceBookVersion, SubsidyProgramme

ROW = 1
# Saves of only these fields leave the shared price book as it was: the ledger keeps ``spent`` and the
# scheduler ``cards_reserved``; neither is read into it.
UNSHARED_FIELDS = {
    SubsidyProgramme: frozenset({"spent"}),
    Node: frozenset({"cards_reserved", "cpu_millis_reserved", "memory_mb_reserved", "backend_name"}),
}


def current() -> uuid.UUID:
    """The token now: one query by primary key (the row is created, with a fresh token, should it be missing)."""
    token = PriceBookVersion.objects.filter(pk=ROW).values_list("token", flat=True).first()
    return token if token is not None else bump()


def bump() -> uuid.UUID:
    """Give the price version a fresh token: every process rebuilds its shared price book on its next read."""
    token = uuid.uuid4()
    if not PriceBookVersion.objects.filter(pk=ROW).update(token=token, changed_at=timezone.now()):
        PriceBookVersion.objects.update_or_create(pk=ROW, defaults={"token": token, "changed_at": timezone.now()})
    return token


def _saved(sender, update_fields=None, **kwargs):
    unshared = UNSHARED_FIELDS.get(sender)
    if unshared and update_fields and set(update_fields) <= unshared:
        return
    bump()


def _deleted(sender, **kwargs):
    bump()


def _places_changed(sender, action, **kwargs):
    if action in ("post_add", "post_remove", "post_clear"):
        bump()


def connect() -> None:
    """Connect the receivers (from ``BillingConfig.ready``)."""
    # A chip too: deleting one silently empties its rows in the programmes' chip lists (no m2m signal for that).
    # Instance specs: the price list shows each spec's price, and caches its content under this version.
    for model in (Price, Plan, SubsidyProgramme, Chip, InstanceSpec, Zone, Region, Node):
        post_save.connect(_saved, sender=model, dispatch_uid=f"price_version_saved_{model._meta.label_lower}")
        post_delete.connect(_deleted, sender=model, dispatch_uid=f"price_version_deleted_{model._meta.label_lower}")
    for through in (SubsidyProgramme.chips.through, SubsidyProgramme.zones.through):
        m2m_changed.connect(_places_changed, sender=through, dispatch_uid=f"price_version_{through._meta.label_lower}")
    # Migrations change rows through historical models, which send none of the signals above.
    post_migrate.connect(_migrated, dispatch_uid="price_version_migrated")


def _migrated(sender, using="default", **kwargs):
    # (sent after every migrate, also one that took billing's tables away)
    if sender.label == "billing" and PriceBookVersion._meta.db_table in connections[using].introspection.table_names():
        bump()
