"""The money rules, each written once: usable trial credit, billed minutes, month bounds, how a charge is paid.

Every other module asks these functions; none restates them.

* **Trial credit** is usable while it has a balance and has not expired; it pays for compute only.
* **Billed minutes**: every started minute is billed, at its start: 0 s → 0, 1 s → 1, 60 s → 1, 61 s → 2.
* **Months** are the operator's local calendar months (``TIME_ZONE``): statements, spending caps, subsidy caps
  and reports all cut a month at local midnight on the first.
* **Paying a charge**: compute spends usable trial credit first, then cash; a subsidy programme adds what it
  books on top, so revenue receives the charge plus the subsidy. Metered minutes and prepaid terms are posted
  with the same entries (:func:`charge_entries`).
"""

import math
from datetime import date, datetime, timedelta
from decimal import Decimal

from django.utils import timezone

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


# Paying a charge ------------------------------------------------------------------------------------------------


def split_payment(payable: Decimal, trial_left: Decimal, *, compute: bool) -> tuple[Decimal, Decimal]:
    """(from trial credit, from cash) for ``payable``: compute spends the trial credit first."""
    from_trial = min(max(trial_left, ZERO), payable) if compute else ZERO
    return from_trial, payable - from_trial


def charge_entries(*, trial, cash, revenue, payable, from_trial, subsidy_account=None, subsidy=ZERO) -> tuple:
    """The ledger entries of one charge: the user's trial and cash accounts pay ``payable`` (``from_trial`` of it
    from the trial credit), a subsidy programme's account pays ``subsidy``, revenue receives both. Zero entries
    are left out (a posting always has at least one entry)."""
    entries = [(trial, -from_trial), (cash, -(payable - from_trial))]
    if subsidy:
        entries.append((subsidy_account, -subsidy))
    entries.append((revenue, payable + subsidy))
    return tuple((account, amount) for account, amount in entries if amount) or ((revenue, ZERO),)
