"""Members' monthly budgets: what each member may spend of the team's wallet in a calendar month.

The team's side of it: the figure, who may set it (the billing permission), and the once-per-period claim of the
stop. The money side (what a member has spent, the gate at launch, the stop when running usage reaches the budget)
is in ``billing.budgets``.
"""

from decimal import Decimal, InvalidOperation

from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext as _

from core.field_errors import FieldError

from .models import Membership

MAX_BUDGET = Decimal("10000000")


def budget_of(account_id: int, member_id: int) -> tuple[str, Decimal] | None:
    """(team name, budget) of ``member_id`` in the team whose account is ``account_id``; None without a budget."""
    row = (
        Membership.objects.filter(team__account_id=account_id, user_id=member_id, monthly_budget__isnull=False)
        .values_list("team__name", "monthly_budget")
        .first()
    )
    return (row[0], row[1]) if row else None


def budgets_for(account_ids, member_ids) -> dict[tuple[int, int], Decimal]:
    """The budgets set among these accounts' teams and these members: ``{(account id, member id): budget}``."""
    rows = Membership.objects.filter(
        team__account_id__in=account_ids, user_id__in=member_ids, monthly_budget__isnull=False
    ).values_list("team__account_id", "user_id", "monthly_budget")
    return {(account, member): budget for account, member, budget in rows}


def claim_stop(account_id: int, member_id: int, period) -> bool:
    """True once per metering period for the member: the budget stop (and its notice) goes out at most once."""
    return bool(
        Membership.objects.filter(team__account_id=account_id, user_id=member_id)
        .filter(Q(budget_stop_period__isnull=True) | Q(budget_stop_period__lt=period))
        .update(budget_stop_period=period)
    )


def claim_notice(account_id: int, member_id: int, month_start) -> bool:
    """True once a month (and again after the budget changes): the notice that the budget was reached goes out
    once, though later charges (a disk kept) reach it again at every tick."""
    return bool(
        Membership.objects.filter(team__account_id=account_id, user_id=member_id)
        .filter(Q(budget_alerted_at__isnull=True) | Q(budget_alerted_at__lt=month_start))
        .update(budget_alerted_at=timezone.now())
    )


def clean_budget(value) -> Decimal | None:
    text = str(value if value is not None else "").strip().replace("¥", "").replace(",", "")
    if not text:
        return None
    try:
        amount = Decimal(text)
    except InvalidOperation:
        amount = None
    if (
        amount is None
        or not amount.is_finite()
        or amount < 0
        or amount > MAX_BUDGET
        or amount != amount.quantize(Decimal("0.01"))
    ):
        raise FieldError(
            "monthly_budget",
            _("Enter a budget in yuan from 0 to %(max)s, with at most two decimals, or leave it empty for none.")
            % {"max": f"{MAX_BUDGET:,.0f}"},
            code="invalid_budget",
        )
    return abs(amount.quantize(Decimal("0.01")))  # "-0" is 0.00
