"""Teams: a group of people who share resources and, in time, one wallet. A person belongs to a team through a
membership with one role; people join by a signed, expiring e-mail invitation."""

import uuid

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext_lazy as _
from django.utils.translation import pgettext_lazy

from .roles import Role


class Team(models.Model):
    """A team. Its ``account`` is a user row that owns what the team owns and holds its wallet: the ledger, the
    funds gate, metering and every ownership filter work for a team as they do for a person. Nobody signs in as
    it (no usable password, an address under ``.invalid`` that no mail reaches, no verified e-mail)."""

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    slug = models.SlugField(_("short name"), max_length=40, unique=True)
    name = models.CharField(_("name"), max_length=80)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="teams_created", verbose_name=_("created by")
    )
    created_at = models.DateTimeField(default=timezone.now)
    account = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="team_account", verbose_name=_("account")
    )

    class Meta:
        verbose_name = _("team")
        verbose_name_plural = _("teams")

    def __str__(self) -> str:
        return self.name


class Membership(models.Model):
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="team_memberships")
    role = models.CharField(_("role"), max_length=16, choices=Role.choices)
    joined_at = models.DateTimeField(default=timezone.now)
    monthly_budget = models.DecimalField(
        _("monthly budget (CNY)"),
        max_digits=12,
        decimal_places=2,
        null=True,
        blank=True,
        help_text=_("What the member may spend of the team's wallet in a calendar month. Empty: no budget."),
    )
    # The metering period in which the budget stop was last asked (at most one stop and one notice per period).
    budget_stop_period = models.DateTimeField(null=True, blank=True)
    # When the member and the billing people were last told the budget was reached (once a month per budget).
    budget_alerted_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = _("team member")
        verbose_name_plural = _("team members")
        constraints = [
            models.UniqueConstraint(fields=["team", "user"], name="one_membership_per_team"),
            models.CheckConstraint(
                condition=Q(monthly_budget__isnull=True) | Q(monthly_budget__gte=0), name="budget_not_negative"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.user} in {self.team} ({self.role})"


class Invitation(models.Model):
    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="invitations")
    email = models.EmailField(_("e-mail address"))
    role = models.CharField(_("role"), max_length=16, choices=Role.choices)
    invited_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, related_name="team_invitations_sent"
    )
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField()
    accepted_at = models.DateTimeField(null=True, blank=True)
    accepted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = _("team invitation")
        verbose_name_plural = _("team invitations")
        constraints = [
            # One open invitation per address and team: inviting again renews it.
            models.UniqueConstraint(
                fields=["team", "email"],
                condition=Q(accepted_at__isnull=True, revoked_at__isnull=True),
                name="one_open_invitation_per_address",
            )
        ]

    def __str__(self) -> str:
        return f"{self.email} to {self.team}"

    @property
    def is_open(self) -> bool:
        return self.accepted_at is None and self.revoked_at is None and self.expires_at > timezone.now()


class TeamEvent(models.Model):
    """The team's audit log: who did what, when. Written by the services, read by owners and admins."""

    class Action(models.TextChoices):
        CREATED = "created", pgettext_lazy("team event", "created the team")
        INVITED = "invited", pgettext_lazy("team event", "invited")
        INVITATION_REVOKED = "invitation_revoked", pgettext_lazy("team event", "withdrew the invitation of")
        JOINED = "joined", pgettext_lazy("team event", "joined")
        ROLE_CHANGED = "role_changed", pgettext_lazy("team event", "changed the role of")
        REMOVED = "removed", pgettext_lazy("team event", "removed")
        LEFT = "left", pgettext_lazy("team event", "left the team")
        LAUNCHED = "launched", pgettext_lazy("team event", "launched the instance")
        STARTED = "started", pgettext_lazy("team event", "started the instance")
        STOPPED = "stopped", pgettext_lazy("team event", "stopped the instance")
        RELEASED = "released", pgettext_lazy("team event", "released the instance")
        TOPUP_STARTED = "topup_started", pgettext_lazy("team event", "started a top-up of")
        VOUCHER_REDEEMED = "voucher_redeemed", pgettext_lazy("team event", "redeemed a voucher of")
        BUDGET_CHANGED = "budget_changed", pgettext_lazy("team event", "changed the monthly budget of")

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="events")
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, related_name="+")
    action = models.CharField(max_length=32, choices=Action.choices)
    subject = models.CharField(max_length=254, blank=True)  # the e-mail address or the resource it was about
    detail = models.CharField(max_length=200, blank=True)
    at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        ordering = ["-at", "-id"]

    def __str__(self) -> str:
        return f"{self.actor} {self.action} {self.subject}"

    @property
    def shown_detail(self) -> str:
        """What the log line adds after the subject, as a person reads it: the role by its name (not its slug),
        the new monthly budget (or that there is none); other details as stored."""
        if self.action in (self.Action.INVITED, self.Action.JOINED, self.Action.ROLE_CHANGED):
            return str(Role(self.detail).label) if self.detail in Role.values else self.detail
        if self.action == self.Action.BUDGET_CHANGED:
            if self.detail in ("", "—"):
                return str(_("no budget"))
            return str(_("to %(amount)s a month") % {"amount": self.detail})
        return self.detail
