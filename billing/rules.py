"""The money rules, each written once: usable trial credit, billed minutes, month bounds, how a charge is paid.

Every other module asks these functions; none restates them.

* **Trial credit** is usable while it has a balance and has not expired; it pays for compute only.
* **Billed minutes**: every started minute is billed, at its start: 0 s → 0, 1 s → 1, 60 s → 1, 61 s → 2. A
  minute belongs to the month it started in, whenever the tick posts it: a posting never mixes two months'
  minutes (:func:`month_segments`), and one that posts a past month's minutes is dated in that month.
* **Posting cadence**: the tick posts a session's billed minutes every ``METERING_POSTING_MINUTES`` (default 5)
  minutes, at minute counts staggered by session so that a tick posts about one in that many sessions, and the
  last minute a session starts in a month is posted as it starts (:func:`last_start_before`); a payer at
  risk is posted every minute: within an hour of spend of zero, stopped, with a spending cap, a member under a
  budget, or holding trial credit or a voucher that expires before the next posting
  (``billing.metering._schedule``).
* **Months** are the operator's local calendar months (``TIME_ZONE``): statements, spending caps, subsidy caps
  and reports all cut a month at local midnight on the first.
* **Paying a charge**, in this order: the vouchers that cover it (the one expiring soonest first), then usable
  trial credit (compute only), then cash. A subsidy programme adds what it books on top (computed on the list
  price, whoever pays the rest), so revenue receives the charge plus the subsidy. Metered minutes and prepaid terms
  are posted with the same entries (:func:`charge_entries`).
* **A voucher covers** compute on its batch's chips, zones and plans (none named: all) until it expires; a batch
  with a minimum spend covers only prepaid plans costing at least that much.
"""

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from decimal import Decimal

from django.conf import settings
from django.core.exceptions import ValidationError
from django.utils import timezone
from django.utils.translation import gettext as _

from .choices import COMPUTE_KINDS
from .money import MINUTES_PER_HOUR, ZERO, to_cents

# Trial credit ---------------------------------------------------------------------------------------------------


def trial_usable(account, now: datetime) -> bool:
    """Whether a trial-credit account may be spent now: it has a balance and has not expired."""
    return account is not None and account.expires_at is not None and account.expires_at > now and account.balance > 0


def usable_trial(account, now: datetime) -> Decimal:
    """What of a trial-credit account may be spent now."""
    return account.balance if trial_usable(account, now) else ZERO


# Billed minutes -------------------------------------------------------------------------------------------------


def billed_minutes(started_at: datetime, until: datetime) -> int:
    """Every started minute counts: 0 s → 0, 1 s → 1, 60 s → 1, 61 s → 2."""
    seconds = (until - started_at).total_seconds()
    return max(0, math.ceil(seconds / 60))


def billed_through(started_at: datetime, now: datetime) -> datetime:
    """The end of the minute ``now`` falls in (at least the first): what a session has billed, or will, up to."""
    return started_at + timedelta(minutes=max(1, billed_minutes(started_at, now)))


def month_segments(started_at: datetime, after: int, upto: int) -> list[tuple[date, int, int]]:
    """Billed minutes ``after`` (exclusive) to ``upto`` (inclusive), counted from 1, cut where a month starts:
    (month, after, upto) for each month, oldest first. Minute ``n`` started at ``started_at + (n − 1) min`` and
    belongs to that moment's month."""
    segments = []
    while after < upto:
        month = month_of(started_at + timedelta(minutes=after))
        following = month_bounds(month)[1]
        # Minutes n ≤ upto with started_at + (n − 1) min < following, i.e. n − 1 < (following − started_at) / 60 s.
        last = min(upto, math.ceil((following - started_at).total_seconds() / 60))
        segments.append((month, after, last))
        after = last
    return segments


def minute_started(started_at: datetime, minute: int) -> datetime:
    """When billed minute ``minute`` (counted from 1) of a session started."""
    return started_at + timedelta(minutes=minute - 1)


def last_start_before(started_at: datetime, end: datetime) -> datetime:
    """The start of a session's last minute that starts before ``end`` (a month's end; its first, if later)."""
    return started_at + timedelta(minutes=max(0, math.ceil((end - started_at).total_seconds() / 60) - 1))


def posting_minutes() -> int:
    """How many billed minutes the tick gathers into one posting per session when its payer is not at risk."""
    return settings.METERING_POSTING_MINUTES


def next_posting(started_at: datetime, billed: int, *, every: int, phase: int) -> datetime:
    """When the tick should next look at a session that has ``billed`` minutes counted: as the minute it should
    post up to starts. That minute count is the next one after ``billed`` that is ``phase`` modulo ``every``, so
    sessions started together still spread their postings over ``every`` ticks; ``every=1`` is the next minute."""
    target = billed + 1 + (phase - billed - 1) % every
    return started_at + timedelta(minutes=target - 1)


def minutes_cost(per_hour: Decimal, minutes: int) -> Decimal:
    """The exact price of ``minutes`` at ``per_hour``, rounded once to the fen."""
    return to_cents(Decimal(per_hour) * minutes / MINUTES_PER_HOUR)


def run_cost(per_hour: Decimal, started_at: datetime, until: datetime) -> Decimal:
    """What a run from ``started_at`` to ``until`` costs at ``per_hour``."""
    return minutes_cost(per_hour, billed_minutes(started_at, until))


# Months ---------------------------------------------------------------------------------------------------------


def month_of(moment: datetime) -> date:
    """The first day of the local month ``moment`` falls in."""
    return timezone.localdate(moment).replace(day=1)


def month_bounds(month: date) -> tuple[datetime, datetime]:
    """The local month that starts on ``month`` (its first day), as [start, end) aware datetimes."""
    start = timezone.make_aware(datetime.combine(month.replace(day=1), datetime.min.time()))
    following = (month.replace(day=1) + timedelta(days=32)).replace(day=1)
    return start, timezone.make_aware(datetime.combine(following, datetime.min.time()))


def month_start(moment: datetime) -> datetime:
    """Local midnight on the first of ``moment``'s month."""
    return month_bounds(month_of(moment))[0]


# Vouchers -------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class VoucherCover:
    """What a voucher pays for: chip, zone and plan slugs (empty: all) and the minimum spend (0: none)."""

    chips: frozenset[str] = frozenset()
    zones: frozenset[str] = frozenset()
    plans: frozenset[str] = frozenset()
    min_spend: Decimal = ZERO


def voucher_covers(cover: VoucherCover, *, kind: str, chip: str, zone: str, plan: str, amount, prepaid: bool) -> bool:
    """Whether a voucher pays for a charge of ``amount`` for ``kind`` on ``chip`` in ``zone`` on ``plan``."""
    if kind not in COMPUTE_KINDS:
        return False
    if (cover.chips and chip not in cover.chips) or (cover.zones and zone not in cover.zones):
        return False
    if cover.plans and plan not in cover.plans:
        return False
    return cover.min_spend <= 0 or (prepaid and amount >= cover.min_spend)


def voucher_usable(account, now: datetime) -> bool:
    """Whether a voucher's account may be spent now: it has a balance and has not expired (the database reads the
    same rule as ``Voucher.objects.usable(now)``)."""
    return account.expires_at is not None and account.expires_at > now and account.balance > 0


# Paying a charge ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Payment:
    """Who pays a charge: (voucher account, amount) pairs, then the trial credit, then cash."""

    from_vouchers: tuple[tuple[int, Decimal], ...]
    from_trial: Decimal
    from_cash: Decimal


def split_payment(
    payable: Decimal, trial_left: Decimal, *, compute: bool, vouchers: Sequence[tuple[int, Decimal]] = ()
) -> Payment:
    """How ``payable`` is paid. ``vouchers`` are (account, what is left) of the vouchers that cover the charge,
    soonest expiry first: they pay first, then the trial credit (compute only), then cash."""
    left = payable
    from_vouchers = []
    for account, balance in vouchers:
        take = min(max(balance, ZERO), left)
        if take > 0:
            from_vouchers.append((account, take))
            left -= take
    from_trial = min(max(trial_left, ZERO), left) if compute else ZERO
    return Payment(tuple(from_vouchers), from_trial, left - from_trial)


def charge_entries(*, trial, cash, revenue, payable, payment: Payment, subsidy_account=None, subsidy=ZERO) -> tuple:
    """The ledger entries of one charge: the vouchers, the trial credit and cash pay ``payable`` as ``payment``
    says, a subsidy programme's account pays ``subsidy``, revenue receives both. Zero entries are left out (a
    posting always has at least one entry)."""
    entries = [(account, -amount) for account, amount in payment.from_vouchers]
    entries += [(trial, -payment.from_trial), (cash, -payment.from_cash)]
    if subsidy:
        entries.append((subsidy_account, -subsidy))
    entries.append((revenue, payable + subsidy))
    return tuple((account, amount) for account, amount in entries if amount) or ((revenue, ZERO),)


# The dates a listing may be filtered by: this century, as a statement's month (billing.forms). A date far outside
# it would overflow the time arithmetic of the filter (the day after 9999-12-31) instead of being refused.
EARLIEST_DATE, LATEST_DATE = date(2000, 1, 1), date(2099, 12, 31)


def check_listing_date(value: date) -> None:
    """Refuse a filter date outside ``EARLIEST_DATE``..``LATEST_DATE`` (a field validator, for forms and the API)."""
    if not EARLIEST_DATE <= value <= LATEST_DATE:
        raise ValidationError(
            _("Give a date from %(first)s to %(last)s.") % {"first": EARLIEST_DATE, "last": LATEST_DATE},
            code="out_of_range",
        )
