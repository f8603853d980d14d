"""Team members' monthly budgets, the money side: what a member has spent of the team's wallet this month, the
gate at launch, and who must be stopped after a metering tick.

A team's charges carry the member they were for (``LedgerTransaction.member``, from the usage session or the
up-front charge), so a member's spend is one indexed sum. The figure itself and the once-per-period claim are the
team's (``teams.budgets``).
"""

from datetime import datetime
from decimal import Decimal

from django.db.models import Sum
from django.db.models.signals import post_save
from django.utils import timezone
from django.utils.translation import gettext as _

from core.errors import PaymentRequired
from teams import budgets as team_budgets
from teams.models import Membership

from . import rules, spend
from .display import format_cny
from .ledger import look_again
from .models import UsageSession
from .money import ZERO, to_cents


class BudgetExceeded(PaymentRequired):
    code = "budget_exceeded"


def spent(account_id: int, member_ids, now: datetime | None = None) -> dict[int, Decimal]:
    """What each member has spent of the account's wallet in ``now``'s calendar month (positive amounts)."""
    totals = spend.month_totals(rules.month_of(now or timezone.now()), [account_id], members=member_ids)
    return {member: amount for (_account, member), amount in totals.items()}


def _running_per_hour(account_id: int, member_id: int) -> Decimal:
    total = (
        UsageSession.objects.open()
        .filter(user_id=account_id, member_id=member_id)
        .aggregate(total=Sum("payable_per_hour"))["total"]
    )
    return Decimal(total or 0)


def check_launch(account_id: int, member_id: int, needed: Decimal, *, pending_per_hour: Decimal = ZERO) -> None:
    """Refuse (402, ``budget_exceeded``) a launch on a team's wallet that would take the member past their monthly
    budget: ``needed`` (one hour, or the prepaid term) plus one hour of what they already run there must fit in
    what is left of it. Nothing for a person's own wallet or a member without a budget. Call under the wallet's
    lock (the funds gate takes it), so members launching at once are counted one after the other."""
    if member_id is None or member_id == account_id:
        return
    found = team_budgets.budget_of(account_id, member_id)
    if found is None:
        return
    team, budget = found
    left = budget - spent(account_id, [member_id]).get(member_id, ZERO)
    committed = to_cents(_running_per_hour(account_id, member_id) + pending_per_hour)
    if needed + committed > left:
        raise BudgetExceeded(
            _(
                "Your monthly budget in %(team)s is %(budget)s and %(left)s of it is left: not enough for %(needed)s "
                "(one hour of this instance, or its prepaid term, and one hour of what you already run there). Ask "
                "an owner, admin or billing member of the team to raise it."
            )
            % {
                "team": team,
                "budget": format_cny(budget),
                "left": format_cny(max(left, ZERO)),
                "needed": format_cny(needed + committed),
            }
        )


def assess(sessions, now: datetime) -> tuple[list[tuple[int, int, Decimal]], set[tuple[int, int]]]:
    """After a tick charged ``sessions``: the (account, member, budget) whose month's spend has reached the
    budget, and every (account, member) of them that has a budget."""
    pairs = {(s.user_id, s.member_id) for s in sessions if s.member_id is not None}
    if not pairs:
        return [], set()
    budgets = {k: v for k, v in team_budgets.budgets_for(*map(set, zip(*pairs, strict=True))).items() if k in pairs}
    if not budgets:
        return [], set()
    # One grouped sum for every budgeted member of the tick, not a query each: this runs inside the metering tick.
    totals = spend.month_totals(rules.month_of(now), {a for a, _m in budgets}, members={m for _a, m in budgets})
    return [(a, m, budget) for (a, m), budget in budgets.items() if totals.get((a, m), ZERO) >= budget], set(budgets)


def _budget_saved(sender, instance, update_fields=None, **kwargs):
    if update_fields is None or "monthly_budget" in update_fields:
        look_again([instance.team.account_id], instance.user_id)


def connect() -> None:
    """A member's budget set or changed is watched by the next metering tick, whatever the posting cadence."""
    post_save.connect(_budget_saved, sender=Membership, dispatch_uid="billing_budget_look_again")
