"""Price lists, plans (with the spot factor) and subsidy programmes: the data the quote function reads.

Prices are history: a change is a new row with a later ``effective_from``, so a quote for any moment uses the
price that was in force then and nothing already shown or charged is rewritten.
"""

import uuid
from decimal import Decimal

from django.conf import settings
from django.core.files.storage import storages
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import get_language, gettext, gettext_noop
from django.utils.translation import gettext_lazy as _

from catalog.models import BilingualName, Chip, Zone
from core.labels import label_of

from .choices import (
    AccountKind,
    Eligibility,
    NotificationKind,
    PaymentProvider,
    StorageResource,
    TopUpStatus,
    TransactionKind,
    UsageKind,
)
from .display import format_cny, format_cny_rate
from .money import (
    FACTOR_DECIMAL_PLACES,
    FACTOR_MAX_DIGITS,
    MONEY_DECIMAL_PLACES,
    MONEY_MAX_DIGITS,
    RATE_DECIMAL_PLACES,
    RATE_MAX_DIGITS,
    ZERO,
)
from .querysets import (
    AppendOnlyQuerySet,
    LedgerTransactionQuerySet,
    NotificationQuerySet,
    PlanQuerySet,
    PriceQuerySet,
    SubsidyProgrammeQuerySet,
    SubsidyUsageQuerySet,
    TopUpQuerySet,
    UsageSessionQuerySet,
    VoucherQuerySet,
)


def _money(verbose_name, **kwargs):
    return models.DecimalField(verbose_name, max_digits=MONEY_MAX_DIGITS, decimal_places=MONEY_DECIMAL_PLACES, **kwargs)


def _factor(verbose_name, **kwargs):
    return models.DecimalField(
        verbose_name,
        max_digits=FACTOR_MAX_DIGITS,
        decimal_places=FACTOR_DECIMAL_PLACES,
        validators=[MinValueValidator(Decimal("0")), MaxValueValidator(Decimal("1"))],
        **kwargs,
    )


class Price(models.Model):
    """A list price in CNY from ``effective_from`` on: per card-hour for a chip, per hour in no-card mode."""

    chip = models.ForeignKey(
        Chip,
        on_delete=models.PROTECT,
        related_name="prices",
        null=True,
        blank=True,
        help_text=_("Empty: the CPU-only no-card mode."),
    )
    per_hour = models.DecimalField(
        _("price per card-hour (CNY)"),
        max_digits=RATE_MAX_DIGITS,
        decimal_places=RATE_DECIMAL_PLACES,
        validators=[MinValueValidator(Decimal("0"))],
    )
    effective_from = models.DateTimeField(_("effective from"))
    note = models.CharField(_("note"), max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = PriceQuerySet.as_manager()

    class Meta:
        verbose_name = _("price")
        verbose_name_plural = _("price list")
        ordering = ["chip__sort_order", "chip__slug", "-effective_from"]
        constraints = [
            models.UniqueConstraint(fields=["chip", "effective_from"], name="one_price_per_chip_and_moment"),
            models.UniqueConstraint(
                fields=["effective_from"], condition=Q(chip__isnull=True), name="one_no_card_price_per_moment"
            ),
            models.CheckConstraint(condition=Q(per_hour__gte=0), name="price_not_negative"),
        ]

    def __str__(self):
        what = self.chip.slug if self.chip_id else "no-card"
        return f"{what}: ¥{self.per_hour}/h from {self.effective_from:%Y-%m-%d %H:%M}"


class StoragePrice(models.Model):
    """A list price in CNY per GB-day from ``effective_from`` on: for cloud disks, or for cloud storage beyond
    the free tier. Like chip prices, a change is a new row with a later ``effective_from``; a disk already
    being metered keeps the price frozen into its usage session until it is grown or deleted."""

    resource = models.CharField(_("applies to"), max_length=16, choices=StorageResource.choices)
    per_gb_day = models.DecimalField(
        _("price per GB-day (CNY)"),
        max_digits=RATE_MAX_DIGITS,
        decimal_places=RATE_DECIMAL_PLACES,
        validators=[MinValueValidator(Decimal("0"))],
    )
    effective_from = models.DateTimeField(_("effective from"))
    note = models.CharField(_("note"), max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = _("storage price")
        verbose_name_plural = _("storage prices")
        ordering = ["resource", "-effective_from"]
        constraints = [
            models.UniqueConstraint(fields=["resource", "effective_from"], name="one_storage_price_per_moment"),
            models.CheckConstraint(condition=Q(per_gb_day__gte=0), name="storage_price_not_negative"),
        ]

    def __str__(self):
        return f"{self.resource}: ¥{self.per_gb_day}/GB-day from {self.effective_from:%Y-%m-%d %H:%M}"


class Plan(BilingualName):
    """How a run is paid: pay-as-you-go per minute, or prepaid periods at a discount factor."""

    slug = models.SlugField(unique=True)
    factor = _factor(_("price factor"), help_text=_("Multiplies the pay-as-you-go price, e.g. 0.9 for daily."))
    period_minutes = models.PositiveIntegerField(
        _("billing period (minutes)"),
        validators=[MinValueValidator(1)],
        help_text=_("1 for per-minute billing; 1440 for a day; 43200 for a 30-day month."),
    )
    spot_factor = _factor(
        _("spot price factor"),
        null=True,
        blank=True,
        # xgettext:no-python-format
        help_text=_("Empty: spot is not offered with this plan. 0.6 means spot is 40% cheaper."),
    )
    active = models.BooleanField(_("active"), default=True)
    sort_order = models.PositiveSmallIntegerField(default=0)

    objects = PlanQuerySet.as_manager()

    class Meta:
        verbose_name = _("plan")
        verbose_name_plural = _("plans")
        ordering = ["sort_order", "slug"]
        constraints = [
            models.CheckConstraint(condition=Q(factor__gt=0) & Q(factor__lte=1), name="plan_factor_in_range"),
            models.CheckConstraint(condition=Q(period_minutes__gte=1), name="plan_period_positive"),
        ]

    @property
    def allows_spot(self) -> bool:
        return self.spot_factor is not None

    @property
    def is_per_minute(self) -> bool:
        return self.period_minutes == 1


class SubsidyProgramme(BilingualName):
    """A subsidy (e.g. the Xinchuang 10%): a rate on chosen chips/zones, within a budget and a monthly cap.

    ``spent`` is a cache kept by the ledger in the same transaction as its entries; the quote reads
    it to stop subsidising the moment the budget runs out.
    """

    slug = models.SlugField(unique=True)
    rate = _factor(
        _("rate"),
        # xgettext:no-python-format
        help_text=_("0.10 takes 10% off the price after plan and spot discounts."),
    )
    chips = models.ManyToManyField(
        Chip, blank=True, related_name="subsidy_programmes", help_text=_("Empty: every chip.")
    )
    zones = models.ManyToManyField(
        Zone, blank=True, related_name="subsidy_programmes", help_text=_("Empty: every zone.")
    )
    starts_at = models.DateTimeField(_("starts"))
    ends_at = models.DateTimeField(_("ends"), null=True, blank=True)
    budget = _money(_("total budget (CNY)"), null=True, blank=True, help_text=_("Empty: no limit."))
    spent = _money(_("spent (CNY)"), default=ZERO, help_text=_("Kept by the ledger."))
    monthly_cap_per_user = _money(_("monthly cap per user (CNY)"), null=True, blank=True, help_text=_("Empty: no cap."))
    eligibility = models.CharField(
        _("eligibility"), max_length=24, choices=Eligibility.choices, default=Eligibility.EVERYONE
    )
    active = models.BooleanField(_("active"), default=True)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = SubsidyProgrammeQuerySet.as_manager()

    class Meta:
        verbose_name = _("subsidy programme")
        verbose_name_plural = _("subsidy programmes")
        ordering = ["-rate", "slug"]
        constraints = [
            models.CheckConstraint(condition=Q(rate__gte=0) & Q(rate__lte=1), name="subsidy_rate_in_range"),
            models.CheckConstraint(condition=Q(spent__gte=0), name="subsidy_spent_not_negative"),
            models.CheckConstraint(
                condition=Q(ends_at__isnull=True) | Q(ends_at__gt=models.F("starts_at")),
                name="subsidy_ends_after_start",
            ),
        ]

    def runs_at(self, at) -> bool:
        """Whether the programme is running at ``at``: the rule of ``SubsidyProgrammeQuerySet.running_at``."""
        return self.active and self.starts_at <= at and (self.ends_at is None or self.ends_at > at)

    @property
    def remaining(self) -> Decimal | None:
        """What is left of the budget (never negative), or None without a budget."""
        if self.budget is None:
            return None
        return max(self.budget - self.spent, ZERO)


class PriceBookVersion(models.Model):
    """One row whose ``token`` changes whenever anything the shared part of a price book is built from changes:
    prices, plans, subsidy programmes (with their chips and zones), zones, regions and nodes.

    Every process keeps its own copy of that shared part and reads this row (one query by primary key) to know
    whether the copy is still current. A fresh random token, never a counter: a change that is rolled back puts
    the old token back, and no later change can ever produce the token of a copy built from rolled-back rows.
    """

    token = models.UUIDField(default=uuid.uuid4)
    changed_at = models.DateTimeField(default=timezone.now)

    class Meta:
        verbose_name = _("price book version")
        verbose_name_plural = _("price book version")

    def __str__(self):
        return f"{self.token} at {self.changed_at:%Y-%m-%d %H:%M:%S}"


class SubsidyUsage(models.Model):
    """How much of a programme one user has received in one calendar month (kept by the ledger)."""

    programme = models.ForeignKey(SubsidyProgramme, on_delete=models.PROTECT, related_name="usages")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="subsidy_usages")
    month = models.DateField(_("month"), help_text=_("The first day of the month."))
    amount = _money(_("subsidy received (CNY)"), default=ZERO)

    objects = SubsidyUsageQuerySet.as_manager()

    class Meta:
        verbose_name = _("subsidy usage")
        verbose_name_plural = _("subsidy usage")
        ordering = ["-month", "programme"]
        constraints = [
            models.UniqueConstraint(fields=["programme", "user", "month"], name="one_usage_row_per_user_month"),
            models.CheckConstraint(condition=Q(amount__gte=0), name="subsidy_usage_not_negative"),
        ]

    def __str__(self):
        return f"{self.programme.slug} · {self.user} · {self.month:%Y-%m}: ¥{self.amount}"


# --- The ledger ------------------------------------------------------------------------------------------
#
# Sign convention: an entry's amount is what it adds to its account. A user's cash and trial balances are
# positive when the operator holds the user's money; revenue grows positive; payment clearing and subsidy
# programmes go negative (money received from the payment provider, subsidy the programme owes). The entries
# of one transaction sum to zero, so the balances of all accounts always sum to zero.


class AppendOnlyError(Exception):
    """Raised on any attempt to change or delete a ledger row: corrections are new transactions."""


class AppendOnlyModel(models.Model):
    """A row that can be inserted, never updated or deleted (the admin is read-only too)."""

    objects = AppendOnlyQuerySet.as_manager()

    class Meta:
        abstract = True

    def save(self, *args, **kwargs):
        if not self._state.adding:
            raise AppendOnlyError(f"{type(self).__name__} rows are append-only.")
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        raise AppendOnlyError(f"{type(self).__name__} rows are append-only.")


class Account(models.Model):
    """A ledger account: a user's cash or trial bucket, or one of the operator's accounts.

    ``balance`` is a cache of the sum of the account's entries, changed only by ``billing.ledger`` in the same
    database transaction as the entries, under a row lock; ``manage.py check_ledger`` proves it.
    """

    kind = models.CharField(_("kind"), max_length=24, choices=AccountKind.choices)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True, related_name="ledger_accounts"
    )
    programme = models.ForeignKey(
        SubsidyProgramme, on_delete=models.PROTECT, null=True, blank=True, related_name="ledger_accounts"
    )
    balance = _money(_("balance (CNY)"), default=ZERO)
    expires_at = models.DateTimeField(
        _("expires"), null=True, blank=True, help_text=_("Trial buckets: when what is left of the credit expires.")
    )
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        verbose_name = _("ledger account")
        verbose_name_plural = _("ledger accounts")
        ordering = ["kind", "pk"]
        constraints = [
            models.UniqueConstraint(
                fields=["user", "kind"],
                condition=Q(user__isnull=False) & ~Q(kind=AccountKind.USER_VOUCHER),
                name="one_bucket_per_user",
            ),
            models.UniqueConstraint(
                fields=["kind"], condition=Q(user__isnull=True, programme__isnull=True), name="one_system_account"
            ),
            models.UniqueConstraint(
                fields=["programme"], condition=Q(programme__isnull=False), name="one_account_per_programme"
            ),
        ]

    def __str__(self):
        owner = self.user or self.programme or ""
        return f"{self.get_kind_display()} {owner}".strip()


class UsageSession(models.Model):
    """One metered run of a resource, at the per-minute price quoted when it started (frozen for the run).

    ``charged`` always equals ``to_cents(payable_per_hour × charged_minutes / 60)``; ``subsidy_booked`` plus
    ``subsidy_unfunded`` likewise for the subsidy (unfunded: the programme's budget or cap ran out mid-run and the
    operator bore it, so the user's rate never changed).
    """

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="usage_sessions")
    # On a team's wallet: the member the resource runs for; its charges carry it.
    member = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        verbose_name=_("team member"),
    )
    kind = models.CharField(_("kind"), max_length=16, choices=UsageKind.choices)
    resource_id = models.UUIDField(_("resource"))
    label = models.CharField(_("label"), max_length=200, blank=True)
    started_at = models.DateTimeField(_("started"))
    ended_at = models.DateTimeField(_("ended"), null=True, blank=True)
    plan_slug = models.CharField(_("plan"), max_length=50)
    prepaid = models.BooleanField(_("prepaid"), default=False, help_text=_("Paid up front: metered at zero."))
    chip_slug = models.CharField(_("chip"), max_length=50, blank=True)
    cards = models.PositiveIntegerField(_("cards"), default=0)
    zone_slug = models.CharField(_("zone"), max_length=50, blank=True)
    spot = models.BooleanField(_("spot"), default=False)
    list_per_hour = models.DecimalField(
        _("list price per hour"), max_digits=RATE_MAX_DIGITS, decimal_places=RATE_DECIMAL_PLACES
    )
    payable_per_hour = models.DecimalField(
        _("payable per hour"), max_digits=RATE_MAX_DIGITS, decimal_places=RATE_DECIMAL_PLACES
    )
    subsidy_per_hour = models.DecimalField(
        _("subsidy per hour"), max_digits=RATE_MAX_DIGITS, decimal_places=RATE_DECIMAL_PLACES, default=ZERO
    )
    programme = models.ForeignKey(
        SubsidyProgramme, on_delete=models.PROTECT, null=True, blank=True, related_name="usage_sessions"
    )
    charged_minutes = models.PositiveIntegerField(_("billed minutes"), default=0)
    charged = _money(_("charged (CNY)"), default=ZERO)
    subsidy_booked = _money(_("subsidy booked (CNY)"), default=ZERO)
    subsidy_unfunded = _money(_("subsidy borne by the operator (CNY)"), default=ZERO)
    # When the metering tick should next look at this open session (billing.rules.next_posting); empty: at the
    # next tick.
    charge_due_at = models.DateTimeField(_("next charge"), null=True, blank=True, editable=False)
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    objects = UsageSessionQuerySet.as_manager()

    class Meta:
        verbose_name = _("usage session")
        verbose_name_plural = _("usage sessions")
        ordering = ["-started_at"]
        constraints = [
            models.UniqueConstraint(fields=["resource_id", "started_at"], name="one_session_per_resource_start"),
            models.UniqueConstraint(
                fields=["resource_id"], condition=Q(ended_at__isnull=True), name="one_open_session_per_resource"
            ),
            models.CheckConstraint(
                condition=Q(ended_at__isnull=True) | Q(ended_at__gte=models.F("started_at")),
                name="usage_ends_after_start",
            ),
        ]
        indexes = [
            models.Index(fields=["user", "started_at"]),
            models.Index(fields=["ended_at", "id"]),
            # The sessions that name a statement page's resources, found per resource among the user's own.
            models.Index(fields=["user", "resource_id", "started_at"]),
        ]

    def __str__(self):
        return f"{self.kind} {self.label or self.resource_id} from {self.started_at:%Y-%m-%d %H:%M}"

    @property
    def is_open(self) -> bool:
        return self.ended_at is None


class TopUp(models.Model):
    """A top-up the user started: a Stripe Checkout Session (or the development sandbox) for an amount in CNY.

    Cash is credited only by ``billing.payments.credit_topup`` — from the signed webhook or the sandbox page —
    exactly once, under the idempotency key of the checkout session.
    """

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="topups")
    amount = _money(_("amount (CNY)"))
    provider = models.CharField(_("provider"), max_length=16, choices=PaymentProvider.choices)
    status = models.CharField(_("status"), max_length=16, choices=TopUpStatus.choices, default=TopUpStatus.PENDING)
    checkout_id = models.CharField(_("checkout session"), max_length=255, unique=True)
    checkout_url = models.CharField(_("checkout URL"), max_length=2000, blank=True)
    payment_reference = models.CharField(_("payment reference"), max_length=255, blank=True, db_index=True)
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    paid_at = models.DateTimeField(_("paid"), null=True, blank=True)

    objects = TopUpQuerySet.as_manager()

    class Meta:
        verbose_name = _("top-up")
        verbose_name_plural = _("top-ups")
        ordering = ["-created_at"]
        constraints = [models.CheckConstraint(condition=Q(amount__gt=0), name="topup_amount_positive")]

    def __str__(self):
        return f"¥{self.amount} {self.provider} {self.status} ({self.user})"

    @property
    def is_sandbox(self) -> bool:
        return self.provider == PaymentProvider.SANDBOX


class SpendQuarter(models.Model):
    """A wallet's spend in one quarter-hour (UTC-aligned, so every local day and month is a whole number of them),
    per team member: ``billing.spend`` adds each posting as it is booked. The spend chart and the month so far read
    these, never the per-minute ledger rows."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    member_id = models.BigIntegerField(default=0)  # who it was for on a team's wallet; 0: the wallet's owner
    start = models.DateTimeField()
    amount_fen = models.BigIntegerField(default=0)  # the change to the wallet in fen: spend is negative

    class Meta:
        constraints = [
            # user and start first: a month's sums of a wallet are one range of this index, whoever spent them
            models.UniqueConstraint(fields=["user", "start", "member_id"], name="spend_quarter_once"),
        ]

    def __str__(self):
        return f"{self.user_id} {self.start:%Y-%m-%d %H:%M} {self.amount_fen}"


class SpendLine(models.Model):
    """A wallet's spend in one local month on one resource, of one kind, per team member: a statement line, added
    to as each posting is booked (``billing.spend``). ``resource_id`` is all zeros for spend on no one resource."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    month = models.DateField()
    resource_id = models.UUIDField()
    kind = models.CharField(max_length=24, choices=TransactionKind.choices)
    member_id = models.BigIntegerField(default=0)
    minutes = models.BigIntegerField(default=0)
    amount_fen = models.BigIntegerField(default=0)
    subsidy_fen = models.BigIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["user", "month", "resource_id", "kind", "member_id"], name="spend_line_once"
            ),
        ]

    def __str__(self):
        return f"{self.user_id} {self.month:%Y-%m} {self.resource_id} {self.kind}"


class LedgerTransaction(AppendOnlyModel):
    """One movement of money: entries that sum to zero, posted once under a unique idempotency key.

    ``user_amount`` is what it changed in the user's wallet (cash + trial; negative for a charge), ``subsidy_amount``
    what a subsidy programme paid — both fixed at posting, so lists and statements need no sums.
    """

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    kind = models.CharField(_("kind"), max_length=24, choices=TransactionKind.choices)
    idempotency_key = models.CharField(_("idempotency key"), max_length=255, unique=True)
    # The foreign keys of the ledger carry no index of their own (db_index=False): every row a tick inserts updates
    # each index of the table, and each of these is served by one below — the user's by the listing's, which starts
    # with the user; a top-up's, a staff author's and a team member's by partial indexes of the few rows that have
    # one (a charge has none of them).
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="ledger_transactions",
        db_index=False,
    )
    user_amount = _money(_("change to the wallet (CNY)"), default=ZERO)
    subsidy_amount = _money(_("subsidy (CNY)"), default=ZERO)
    # Negative on a usage posting that gives back minutes charged past a run's end noticed late.
    minutes = models.IntegerField(_("billed minutes"), default=0)
    usage_session = models.ForeignKey(
        UsageSession, on_delete=models.PROTECT, null=True, blank=True, related_name="transactions"
    )
    topup = models.ForeignKey(
        TopUp, on_delete=models.PROTECT, null=True, blank=True, related_name="transactions", db_index=False
    )
    resource_id = models.UUIDField(_("resource"), null=True, blank=True, help_text=_("What was paid for."))
    reason = models.CharField(_("reason"), max_length=255, blank=True)
    reference = models.CharField(_("reference"), max_length=255, blank=True)
    provider_reference = models.CharField(_("payment provider reference"), max_length=255, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True, related_name="+", db_index=False
    )
    # On a team's wallet: the member the spend was for (who launched the resource), for budgets and statements.
    member = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        verbose_name=_("team member"),
        db_index=False,
    )
    created_at = models.DateTimeField(_("at"), default=timezone.now, editable=False)

    objects = LedgerTransactionQuerySet.as_manager()

    class Meta:
        verbose_name = _("ledger transaction")
        verbose_name_plural = _("ledger transactions")
        ordering = ["-created_at", "-pk"]
        # The listing's whole order (newest first, then the newest id among equal times) is in the index, so a
        # deep page walks the index to its offset instead of sorting each run of transactions posted at one time.
        indexes = [
            models.Index(fields=["user", "-created_at", "-id"], name="ledger_user_newest"),
            models.Index(fields=["user", "kind", "-created_at", "-id"], name="ledger_user_kind_newest"),
            models.Index(fields=["user", "member", "created_at"], name="ledger_member_spend"),
            models.Index(fields=["topup"], condition=Q(topup__isnull=False), name="ledger_topup"),
            models.Index(fields=["created_by"], condition=Q(created_by__isnull=False), name="ledger_created_by"),
            models.Index(fields=["member"], condition=Q(member__isnull=False), name="ledger_member"),
        ]

    def __str__(self):
        return f"{self.get_kind_display()} {self.idempotency_key}"

    def get_kind_display(self) -> str:
        return label_of(TransactionKind, self.kind)

    @property
    def description(self) -> str:
        parts = [self.get_kind_display()]
        if self.reference:
            parts.append(self.reference)
        if self.kind == TransactionKind.USAGE and self.minutes < 0:
            parts.append(str(_("minutes after the end given back")))
        return " · ".join(parts)


class LedgerEntry(AppendOnlyModel):
    """One leg of a transaction: an amount added to one account (negative takes away)."""

    transaction = models.ForeignKey(LedgerTransaction, on_delete=models.PROTECT, related_name="entries")
    # No index of its own: the (account, created_at) index below starts with it.
    account = models.ForeignKey(Account, on_delete=models.PROTECT, related_name="entries", db_index=False)
    amount = _money(_("amount (CNY)"))
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        verbose_name = _("ledger entry")
        verbose_name_plural = _("ledger entries")
        ordering = ["pk"]
        indexes = [models.Index(fields=["account", "created_at"])]

    def __str__(self):
        return f"{self.account}: {self.amount}"


class TrialGrant(models.Model):
    """The ¥10 trial credit granted once per verified e-mail address, ever (the address is kept normalised even if
    the account goes), and once per user."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="trial_grant"
    )
    email = models.CharField(_("normalised e-mail address"), max_length=254, unique=True)
    amount = _money(_("amount (CNY)"))
    granted_at = models.DateTimeField(_("granted"))
    expires_at = models.DateTimeField(_("expires"))
    expired_at = models.DateTimeField(_("expiry booked"), null=True, blank=True)

    class Meta:
        verbose_name = _("trial credit grant")
        verbose_name_plural = _("trial credit grants")
        ordering = ["-granted_at"]

    def __str__(self):
        return f"{self.email}: ¥{self.amount} until {self.expires_at:%Y-%m-%d}"


class Wallet(models.Model):
    """A user's wallet settings and alert state: the monthly spending cap and which alerts were already sent."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="wallet")
    spending_cap = _money(_("monthly spending cap (CNY)"), null=True, blank=True, help_text=_("Empty: no cap."))
    low_balance_alerted_at = models.DateTimeField(null=True, blank=True)
    arrears_alerted_at = models.DateTimeField(null=True, blank=True)
    arrears_period = models.DateTimeField(
        null=True, blank=True, help_text=_("The metering period in which the arrears stop was last asked.")
    )

    class Meta:
        verbose_name = _("wallet")
        verbose_name_plural = _("wallets")
        constraints = [
            models.CheckConstraint(condition=Q(spending_cap__isnull=True) | Q(spending_cap__gte=0), name="cap_positive")
        ]

    def __str__(self):
        return f"wallet of {self.user}"


# What a job's notifications say (the jobs app writes them; their figures: the job's name, an exit status, seconds).
JOB_MESSAGES = {
    NotificationKind.JOB_STARTED: gettext_noop("Job “%(name)s” started."),
    NotificationKind.JOB_SUCCEEDED: gettext_noop("Job “%(name)s” succeeded; its machine was released."),
    NotificationKind.JOB_FAILED: gettext_noop(
        "Job “%(name)s” failed (exit status %(code)s); its machine was released and billing stopped."
    ),
    NotificationKind.JOB_TIMED_OUT: gettext_noop(
        "Job “%(name)s” ran past its timeout of %(seconds)s seconds: it was stopped and billed only up to the timeout."
    ),
    # A launch that waited for a card (the instances app writes them; figures: the instance's name, the reason).
    NotificationKind.QUEUE_STARTED: gettext_noop("Instance “%(name)s” waited for a card and is starting now."),
    NotificationKind.QUEUE_LEFT: gettext_noop("Instance “%(name)s” left the queue without starting. %(why)s"),
    # A schedule's due run that did not start (figures: the schedule's name, the reason).
    NotificationKind.SCHEDULE_MISSED: gettext_noop("A scheduled run of “%(name)s” did not start: %(why)s"),
}


class Notification(models.Model):
    """A billing alert shown on the dashboard and e-mailed: low balance, out of balance, cap reached."""

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="billing_notifications")
    kind = models.CharField(_("kind"), max_length=24, choices=NotificationKind.choices)
    params = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    read_at = models.DateTimeField(null=True, blank=True)
    emailed_at = models.DateTimeField(null=True, blank=True)

    objects = NotificationQuerySet.as_manager()

    class Meta:
        verbose_name = _("billing notification")
        verbose_name_plural = _("billing notifications")
        ordering = ["-created_at"]

    def __str__(self):
        return f"{self.kind} for {self.user}"

    @property
    def message(self) -> str:
        """The alert in the active language (stored as a kind and figures, so each reader gets their language)."""
        p = self.params
        if self.kind == NotificationKind.LOW_BALANCE:
            # The stored rate keeps six places; the message shows it the way every page shows a rate.
            p = {**p, "balance": format_cny(p.get("balance")), "hourly": format_cny_rate(p.get("hourly"))}
            return (
                gettext(
                    "Your balance of %(balance)s covers less than one hour of your running resources (%(hourly)s "
                    "an hour). Top up to keep them running."
                )
                % p
            )
        if self.kind == NotificationKind.ARREARS:
            return (
                gettext(
                    "Your balance has run out. Pay-as-you-go instances are being stopped (with the checkpoint signal); "
                    "disks and storage are kept for %(days)s days. Top up to continue."
                )
                % p
            )
        if self.kind == NotificationKind.MEMBER_BUDGET:
            p = {**p, "budget": format_cny(p.get("budget"))}
            if p.get("member"):
                return (
                    gettext(
                        "%(member)s reached their monthly budget of %(budget)s in %(team)s. Their pay-as-you-go "
                        "instances on the team's wallet are being stopped (with the checkpoint signal); disks are "
                        "kept. Raise their budget on the members' spending page to let them continue."
                    )
                    % p
                )
            return (
                gettext(
                    "You reached your monthly budget of %(budget)s in %(team)s. Your pay-as-you-go instances on the "
                    "team's wallet are being stopped (with the checkpoint signal); disks are kept. Ask an owner, "
                    "admin or billing member of the team to raise it."
                )
                % p
            )
        if self.kind == NotificationKind.SPENDING_CAP:
            return gettext(
                "You reached your monthly spending cap of %(cap)s. Pay-as-you-go instances are being stopped; "
                "raise the cap on the wallet page to continue."
            ) % {**p, "cap": format_cny(p.get("cap"))}
        if self.kind == NotificationKind.DISK_REMINDER:
            return (
                gettext(
                    "Your balance is still in arrears: disk “%(disk)s” will be deleted on %(date)s, and its data with "
                    "it. Top up before then to keep it."
                )
                % p
            )
        if self.kind == NotificationKind.DISK_DELETED:
            return gettext("Disk “%(disk)s” was deleted: the balance stayed in arrears for %(days)s days.") % p
        if self.kind == NotificationKind.SPOT_PREEMPTED:
            return (
                gettext(
                    "Spot instance “%(name)s” was reclaimed: it got the checkpoint signal and %(notice)s seconds to "
                    "save its work, and billing stopped. Its disks are kept; relaunch it with one click on its page."
                )
                % p
            )
        if self.kind == NotificationKind.RELEASE_REMINDER:
            return (
                gettext(
                    "Instance “%(name)s” is stopped and will be released on %(date)s: its system disk will be deleted "
                    "(data disks are kept). Start it before then to keep it."
                )
                % p
            )
        if self.kind in JOB_MESSAGES:
            return gettext(JOB_MESSAGES[self.kind]) % p
        if self.kind == NotificationKind.VOUCHER_EXPIRED:
            chinese = (get_language() or "").startswith("zh") and p.get("name_zh")
            name = p.get("name_zh") if chinese else p.get("name")
            return gettext("Your voucher “%(name)s” expired with %(amount)s unused.") % {
                **p,
                "name": name,
                "amount": format_cny(p.get("amount")),
            }
        return gettext("Your trial credit of %(amount)s expired.") % {**p, "amount": format_cny(p.get("amount"))}


def _invoice_storage():
    return storages["cloudstorage"]


class Invoice(models.Model):
    """A fapiao (发票) asked for paid money: a general VAT invoice (增值税普通发票, a person's or a company's) or a
    special one (增值税专用发票, verified enterprises only). Finance issues it in the back office with the number and
    the PDF the tax system returned, or rejects it with a reason (``billing.invoices``)."""

    class Kind(models.TextChoices):
        GENERAL = "general", _("General VAT invoice (增值税普通发票)")
        SPECIAL = "special", _("Special VAT invoice (增值税专用发票)")

    class Status(models.TextChoices):
        REQUESTED = "requested", _("Requested")
        ISSUED = "issued", _("Issued")
        REJECTED = "rejected", _("Rejected")
        REVERSED = "reversed", _("Reversed (红冲)")

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="invoices")
    kind = models.CharField(_("type"), max_length=8, choices=Kind.choices, default=Kind.GENERAL)
    title = models.CharField(_("title (抬头)"), max_length=200)
    tax_id = models.CharField(_("taxpayer ID"), max_length=20, blank=True)
    address = models.CharField(_("registered address"), max_length=200, blank=True)
    phone = models.CharField(_("phone"), max_length=32, blank=True)
    bank = models.CharField(_("bank"), max_length=100, blank=True)
    bank_account = models.CharField(_("bank account"), max_length=60, blank=True)
    amount = _money(_("amount (CNY)"))
    status = models.CharField(_("status"), max_length=10, choices=Status.choices, default=Status.REQUESTED)
    number = models.CharField(_("invoice number"), max_length=40, blank=True)
    reversal_number = models.CharField(
        _("red-letter invoice number"), max_length=40, blank=True, help_text=_("The 红冲 invoice that cancels it.")
    )
    reversed_at = models.DateTimeField(_("reversed"), null=True, blank=True)
    pdf = models.FileField(_("PDF"), storage=_invoice_storage, upload_to="invoices/", blank=True)
    reason = models.CharField(_("reason"), max_length=500, blank=True, help_text=_("Shown to the customer."))
    requested_at = models.DateTimeField(_("requested"), default=timezone.now, editable=False)
    reviewed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="+",
        verbose_name=_("reviewed by"),
    )
    reviewed_at = models.DateTimeField(_("reviewed"), null=True, blank=True)

    class Meta:
        verbose_name = _("invoice")
        verbose_name_plural = _("invoices")
        ordering = ["-requested_at", "-id"]
        constraints = [
            models.CheckConstraint(condition=Q(amount__gt=0), name="invoice_amount_positive"),
            models.UniqueConstraint(fields=["number"], condition=~Q(number=""), name="invoice_number_once"),
            models.UniqueConstraint(
                fields=["reversal_number"], condition=~Q(reversal_number=""), name="invoice_reversal_number_once"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} {self.amount} ({self.get_status_display()})"


# --- Vouchers (代金券) ---------------------------------------------------------------------------------------------


class VoucherBatch(BilingualName):
    """Vouchers the operator hands out: each redeemed code gives a wallet ``amount`` yuan that pays for the compute
    the batch covers (its chips, zones and plans; empty means all) before the trial credit and cash, until
    ``expires_at``. ``min_spend`` above zero limits it to prepaid plans costing at least that much."""

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    amount = _money(_("amount per voucher (CNY)"))
    expires_at = models.DateTimeField(_("expires"))
    min_spend = _money(
        _("minimum spend (CNY)"),
        default=ZERO,
        help_text=_("0: pays for any covered charge. Above 0: only for a prepaid plan costing at least this."),
    )
    chips = models.ManyToManyField(Chip, blank=True, related_name="voucher_batches", help_text=_("Empty: every chip."))
    zones = models.ManyToManyField(Zone, blank=True, related_name="voucher_batches", help_text=_("Empty: every zone."))
    plans = models.ManyToManyField(Plan, blank=True, related_name="voucher_batches", help_text=_("Empty: every plan."))
    quantity = models.PositiveIntegerField(_("how many"))
    one_per_user = models.BooleanField(_("one per user"), default=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        verbose_name = _("voucher batch")
        verbose_name_plural = _("voucher batches")
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(condition=Q(amount__gt=0), name="voucher_amount_positive"),
            models.CheckConstraint(condition=Q(min_spend__gte=0), name="voucher_min_spend_not_negative"),
        ]


class VoucherCode(models.Model):
    """A code that redeems a voucher of its batch: a code of its own (``uses`` 1) or one shared code used up to
    ``uses`` times. ``redeemed`` only grows, by a conditional update, so a code is never used more than allowed."""

    batch = models.ForeignKey(VoucherBatch, on_delete=models.CASCADE, related_name="codes")
    code = models.CharField(_("code"), max_length=32, unique=True)
    uses = models.PositiveIntegerField(_("uses"), default=1)
    redeemed = models.PositiveIntegerField(_("redeemed"), default=0)

    class Meta:
        verbose_name = _("voucher code")
        verbose_name_plural = _("voucher codes")
        ordering = ["pk"]
        constraints = [
            models.CheckConstraint(condition=Q(redeemed__lte=models.F("uses")), name="voucher_code_not_overused")
        ]

    def __str__(self):
        return self.code


class Voucher(models.Model):
    """A redeemed voucher: its own ledger account in the wallet it was redeemed into (a person's or a team's)."""

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    batch = models.ForeignKey(VoucherBatch, on_delete=models.PROTECT, related_name="vouchers")
    code = models.ForeignKey(VoucherCode, on_delete=models.PROTECT, related_name="vouchers")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="vouchers")
    redeemed_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    account = models.OneToOneField(Account, on_delete=models.PROTECT, related_name="voucher")
    amount = _money(_("amount (CNY)"))
    expires_at = models.DateTimeField(_("expires"))
    redeemed_at = models.DateTimeField(_("redeemed"), default=timezone.now)
    expired_at = models.DateTimeField(_("expiry booked"), null=True, blank=True)
    # The batch, when it allows one voucher per person (else empty): a unique pair with the person.
    once_per_person = models.ForeignKey(
        VoucherBatch, on_delete=models.PROTECT, null=True, blank=True, related_name="+", editable=False
    )

    objects = VoucherQuerySet.as_manager()

    class Meta:
        verbose_name = _("voucher")
        verbose_name_plural = _("vouchers")
        ordering = ["expires_at", "pk"]
        constraints = [
            models.UniqueConstraint(fields=["redeemed_by", "code"], name="voucher_code_once_per_person"),
            models.UniqueConstraint(
                fields=["redeemed_by", "once_per_person"],
                condition=Q(once_per_person__isnull=False),
                name="voucher_batch_once_per_person",
            ),
        ]

    def __str__(self):
        return f"{self.batch} ({self.amount})"
