"""Price lists, plans (with the spot factor) and subsidy programmes: the data the quote function reads.

Prices are history: a change is a new row with a later ``effective_from``, so a quote for any moment uses the
price that was in force then and nothing already shown or charged is rewritten.
"""

from decimal import Decimal

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _

from instances.models import BilingualName, Chip, Zone

from .choices import Eligibility
from .money import (
    FACTOR_DECIMAL_PLACES,
    FACTOR_MAX_DIGITS,
    MONEY_DECIMAL_PLACES,
    MONEY_MAX_DIGITS,
    RATE_DECIMAL_PLACES,
    RATE_MAX_DIGITS,
    ZERO,
)
from .querysets import PlanQuerySet, PriceQuerySet, SubsidyProgrammeQuerySet, SubsidyUsageQuerySet


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

    ``spent`` is a cache kept by the ledger (issue 4) in the same transaction as its entries; the quote reads
    it to stop subsidising the moment the budget runs out.
    """

    slug = models.SlugField(unique=True)
    rate = _factor(_("rate"), help_text=_("0.10 takes 10% off the price after plan and spot discounts."))
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

    @property
    def remaining(self) -> Decimal | None:
        """What is left of the budget (never negative), or None without a budget."""
        if self.budget is None:
            return None
        return max(self.budget - self.spent, ZERO)


class SubsidyUsage(models.Model):
    """How much of a programme one user has received in one calendar month (kept by the ledger, issue 4)."""

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
