"""The dashboard's first steps for someone with no instance yet: what the trial credit buys, priced live."""

from dataclasses import dataclass
from decimal import ROUND_DOWN, Decimal

from django.core.cache import cache

from billing.quote import load_price_book, quote
from billing.wallet import trial_amount
from catalog.models import Chip
from core.errors import ServiceError
from instances.models import Instance


@dataclass(frozen=True)
class TrialBuys:
    """``credit`` pays for about ``hours`` hours of one ``chip`` card at ``per_hour`` (pay-as-you-go, after
    subsidies): the cheapest card on offer now."""

    credit: Decimal
    chip: Chip
    per_hour: Decimal
    hours: Decimal


# An account that has launched once always has (instances are never deleted): the answer is kept, never bumped.
LAUNCHED_KEY = "onboarding:launched:{pk}"
LAUNCHED_SECONDS = 24 * 3600


def needs_first_steps(user, account=None) -> bool:
    """No instance ever launched (released ones count: they have launched before). The launches of ``account`` (whose
    pages are open: the user's own, or a team's they belong to) answer it with a plain query on the owner, once
    (kept in the cache when it has launched); only when it has none are all the instances the user can see looked
    at."""
    owner_id = (account or user).pk
    key = LAUNCHED_KEY.format(pk=owner_id)
    if cache.get(key):
        return False
    if Instance.objects.filter(owner_id=owner_id).not_endpoints().exists():
        cache.set(key, True, LAUNCHED_SECONDS)
        return False
    return not Instance.objects.for_user(user).not_endpoints().exists()


def trial_buys(user) -> TrialBuys | None:
    """What the trial credit buys on the cheapest card with a published price (the one quote function prices
    every chip, for this user); None when no chip is priced yet."""
    book = load_price_book(user=user)
    priced = []
    for chip in Chip.objects.rentable().order_by("sort_order"):
        try:
            priced.append((quote(chip=chip, cards=1, book=book).payable_per_hour, chip.sort_order, chip))
        except ServiceError:
            continue  # not offered in any zone yet, or no price published
    priced = [row for row in priced if row[0] > 0]
    if not priced:
        return None
    per_hour, _order, chip = min(priced, key=lambda row: row[:2])
    credit = trial_amount()
    hours = (credit / per_hour).quantize(Decimal("0.1"), rounding=ROUND_DOWN)
    return TrialBuys(credit=credit, chip=chip, per_hour=per_hour, hours=hours)
