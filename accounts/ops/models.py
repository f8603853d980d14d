"""The back office's own rows: the append-only audit log and the capacity snapshots behind the chart.

They belong to the ``console`` app (``accounts/models.py`` imports this module), so their migrations are the
console's. The staff roles' custom permissions live on :class:`AuditEntry`'s ``Meta`` (see ``roles.py``).
"""

import uuid

from django.conf import settings
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from . import audit_text
from .choices import BADGE_COLOURS, AuditAction


class AuditLogIsAppendOnly(Exception):
    """Raised on any attempt to change or delete an audit row: what staff did stays written."""


class AuditEntryQuerySet(models.QuerySet):
    def update(self, **kwargs):
        raise AuditLogIsAppendOnly("audit entries are append-only")

    def delete(self):
        raise AuditLogIsAppendOnly("audit entries are append-only")

    def for_user(self, user, action: str = "view"):
        """Staff with the audit permission read every row; nobody changes one."""
        if action != "view" or not getattr(user, "is_authenticated", False) or not user.is_staff:
            return self.none()
        return self if user.has_perm("console.view_auditentry") else self.none()

    def search(self, text: str = "", action: str = ""):
        qs = self
        if action:
            qs = qs.filter(action=action)
        text = (text or "").strip()
        if text:
            qs = qs.filter(
                models.Q(actor_email__icontains=text)
                | models.Q(target_id__iexact=text)
                | models.Q(target_label__icontains=text)
                | models.Q(reason__icontains=text)
            )
        return qs


class AuditEntry(models.Model):
    """One staff action: who did what to which object, the state before and after, why, when, from where.

    Written only by :func:`accounts.ops.audit.record`, in the same transaction as the change it describes.
    Append-only: ``save`` refuses an update, ``delete`` and the queryset's ``update``/``delete`` refuse too, and
    the admin offers neither.
    """

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    actor_email = models.CharField(_("staff member"), max_length=254, blank=True)
    action = models.CharField(_("action"), max_length=40, choices=AuditAction.choices)
    target_type = models.CharField(_("target type"), max_length=40)
    target_id = models.CharField(_("target id"), max_length=64)
    target_label = models.CharField(_("target"), max_length=255, blank=True)
    before = models.JSONField(_("before"), default=dict, blank=True)
    after = models.JSONField(_("after"), default=dict, blank=True)
    reason = models.CharField(_("reason"), max_length=500, blank=True)
    ip = models.GenericIPAddressField(_("IP address"), null=True, blank=True)
    at = models.DateTimeField(_("at"), default=timezone.now, editable=False)

    objects = AuditEntryQuerySet.as_manager()

    class Meta:
        verbose_name = _("audit entry")
        verbose_name_plural = _("audit log")
        ordering = ["-at", "-pk"]
        default_permissions = ("view",)
        permissions = [
            ("view_users", _("Can look up users, their balances and instances")),
            ("manage_capacity", _("Can drain nodes and return them to service")),
            ("force_stop_instance", _("Can force-stop any instance")),
            ("review_enterprise", _("Can approve or reject enterprise verifications")),
            ("review_image", _("Can approve or reject community images")),
            ("view_finance", _("Can see revenue, subsidy spend and the reconciliation")),
            ("adjust_balance", _("Can adjust users' balances")),
            ("manage_prices", _("Can add prices to the price list")),
            ("manage_subsidies", _("Can create, pause and change subsidy programmes")),
        ]
        indexes = [
            models.Index(fields=["target_type", "target_id"], name="audit_target"),
            models.Index(fields=["action", "-at"], name="audit_action_recent"),
        ]

    def __str__(self):
        return f"{self.at:%Y-%m-%d %H:%M} {self.actor_email} {self.action} {self.target_type}:{self.target_id}"

    def save(self, *args, **kwargs):
        if not self._state.adding:
            raise AuditLogIsAppendOnly("audit entries are append-only")
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        raise AuditLogIsAppendOnly("audit entries are append-only")

    @property
    def target_kind(self) -> str:
        return audit_text.target_kind(self.target_type)

    @property
    def changes(self):
        return audit_text.changes(self)

    @property
    def badge(self) -> str:
        return BADGE_COLOURS.get(self.action, "info")


class CapacitySnapshot(models.Model):
    """Cards of one chip in one zone at one moment, recorded by the capacity beat for the chart over time.

    ``at`` is the start of the snapshot's slot, so two overlapping beats write the same row once.
    """

    at = models.DateTimeField(_("at"))
    zone = models.ForeignKey("catalog.Zone", on_delete=models.CASCADE, related_name="+")
    chip = models.ForeignKey("catalog.Chip", on_delete=models.CASCADE, related_name="+")
    cards_total = models.PositiveIntegerField(_("cards"))
    cards_used = models.PositiveIntegerField(_("cards in use"))
    cards_drained = models.PositiveIntegerField(_("idle cards on drained nodes"), default=0)
    running_instances = models.PositiveIntegerField(_("running instances"), default=0)

    class Meta:
        verbose_name = _("capacity snapshot")
        verbose_name_plural = _("capacity snapshots")
        ordering = ["-at", "zone", "chip"]
        constraints = [models.UniqueConstraint(fields=["at", "zone", "chip"], name="one_snapshot_per_slot")]

    def __str__(self):
        return f"{self.at:%Y-%m-%d %H:%M} {self.zone_id}/{self.chip_id}: {self.cards_used}/{self.cards_total}"

    @property
    def cards_free(self) -> int:
        return max(self.cards_total - self.cards_used - self.cards_drained, 0)
