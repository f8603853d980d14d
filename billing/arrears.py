"""Arrears: the low-balance alert, and the stop at zero balance or at the monthly spending cap.

The published policy (SPEC §5): an alert when one hour of spend is left; when the balance reaches zero — or the
user's monthly spending cap — pay-as-you-go resources are stopped (with the checkpoint signal) within one
metering period, and disks and storage are kept for ``ARREARS_RETENTION_DAYS`` with notices before release.

Billing decides *who*; the instances app does the stopping: it registers its handler when Django starts
(:func:`register_handler`), and the handler is called as ``handler(user_id, reason)`` after the charge commits, at
most once per user per metering period. Nothing is looked up by name: a console with no handler registered fails
its system checks (``billing.E002``) and does not start.
"""

import logging
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal

from django.conf import settings
from django.db import transaction
from django.db.models import Q, Sum

from teams import budgets as team_budgets
from teams.accounts import member_email, team_name

from . import rules, spend
from .choices import AccountKind, NotificationKind
from .models import Notification, UsageSession, Wallet
from .money import ZERO, to_rate
from .tasks import email_notification

log = logging.getLogger(__name__)

REASON_ARREARS = "arrears"
REASON_SPENDING_CAP = "spending_cap"
REASON_MEMBER_BUDGET = "member_budget"


@dataclass
class Alerts:
    """What one charge found: users to warn (user, balance, hourly spend) and users to stop (user, reason, figure)."""

    low: list[tuple[int, Decimal, Decimal]] = field(default_factory=list)
    stop: list[tuple[int, str, Decimal]] = field(default_factory=list)
    # Team members whose month's spend of the team's wallet reached their budget: (account, member, budget).
    budget: list[tuple[int, int, Decimal]] = field(default_factory=list)
    # Users with a spending cap, and (account, member) pairs with a budget: their charges are posted every minute.
    capped: set[int] = field(default_factory=set)
    budgeted: set[tuple[int, int]] = field(default_factory=set)

    def __bool__(self):
        return bool(self.low or self.stop or self.budget)

    def at_risk(self) -> tuple[set[int], set[tuple[int, int]]]:
        """The payers who could reach zero, a cap or a budget within minutes: low, stopped or capped users, and
        (account, member) pairs under a budget."""
        users = {uid for uid, *_rest in self.low} | {uid for uid, *_rest in self.stop} | self.capped
        return users, self.budgeted


def retention_days() -> int:
    return settings.ARREARS_RETENTION_DAYS


def assess(buckets: dict[int, dict], now: datetime, *, vouchers: dict[int, Decimal] | None = None) -> Alerts:
    """Given the users' accounts just charged (balances after the charge), who is low, who must be stopped.

    ``vouchers``: what each user's usable vouchers hold. A user whose cash and trial credit are spent keeps running
    on vouchers while their cash stays at zero; once cash goes below zero (a charge the vouchers do not cover),
    they are stopped as anyone else is.
    """
    vouchers = vouchers or {}
    balances, stop = {}, []
    for uid, accounts in buckets.items():
        trial = accounts.get(AccountKind.USER_TRIAL)
        cash = accounts.get(AccountKind.USER_CASH)
        cash_balance = cash.balance if cash else ZERO
        own = cash_balance + rules.usable_trial(trial, now)
        held = vouchers.get(uid, ZERO)
        balances[uid] = own + held
        if own <= 0 and (cash_balance < 0 or held <= 0):
            stop.append(uid)
    alerts = Alerts()
    alerts.stop = [(uid, REASON_ARREARS, balances[uid]) for uid in stop]
    stopped = set(stop)
    solvent = [uid for uid in balances if uid not in stopped]
    if not solvent:
        return alerts
    hourly = {
        uid: to_rate(Decimal(total))
        for uid, total in UsageSession.objects.open()
        .filter(user_id__among=solvent)
        .values_list("user_id")
        .annotate(total=Sum("payable_per_hour"))
        .values_list("user_id", "total")
    }
    alerts.low = [(u, balances[u], hourly[u]) for u in solvent if hourly.get(u) and balances[u] < hourly[u]]
    caps = dict(
        Wallet.objects.filter(user_id__among=solvent, spending_cap__isnull=False).values_list("user_id", "spending_cap")
    )
    alerts.capped = set(caps)
    if caps:
        spent = spend.month_totals(rules.month_of(now), caps)
        alerts.stop += [(u, REASON_SPENDING_CAP, cap) for u, cap in caps.items() if spent.get(u, ZERO) >= cap]
    return alerts


def follow_up(alerts: Alerts, now: datetime) -> None:
    """Send the alerts and ask for the stops (each at most once: compare-and-set on the user's wallet row)."""
    if not alerts:
        return
    users = {uid for uid, *_rest in alerts.low} | {uid for uid, *_rest in alerts.stop}
    Wallet.objects.bulk_create([Wallet(user_id=uid) for uid in users], ignore_conflicts=True)
    for uid, balance, hourly in alerts.low:
        if Wallet.objects.filter(user_id=uid, low_balance_alerted_at__isnull=True).update(low_balance_alerted_at=now):
            notify(uid, NotificationKind.LOW_BALANCE, balance=str(balance), hourly=str(hourly))
    period = now.replace(second=0, microsecond=0)
    stops = defaultdict(list)
    for uid, reason, figure in alerts.stop:
        stops[uid].append((reason, figure))
    for uid, reasons in stops.items():
        reason, figure = reasons[0]
        claimed = (
            Wallet.objects.filter(user_id=uid)
            .filter(Q(arrears_period__isnull=True) | Q(arrears_period__lt=period))
            .update(arrears_period=period)
        )
        if not claimed:
            continue
        if Wallet.objects.filter(user_id=uid, arrears_alerted_at__isnull=True).update(arrears_alerted_at=now):
            if reason == REASON_SPENDING_CAP:
                notify(uid, NotificationKind.SPENDING_CAP, cap=str(figure))
            else:
                notify(uid, NotificationKind.ARREARS, days=retention_days())
        transaction.on_commit(lambda uid=uid, reason=reason: call_handler(uid, reason))
    for account_id, member_id, budget in alerts.budget:
        # The member's pay-as-you-go instances on the team's wallet stop as in arrears; the member and the team's
        # billing people are told, once per metering period.
        if not team_budgets.claim_stop(account_id, member_id, period):
            continue
        if team_budgets.claim_notice(account_id, member_id, rules.month_start(now)):
            params = {"budget": str(budget), "team": team_name(account_id)}
            notify(member_id, NotificationKind.MEMBER_BUDGET, **params)
            notify(account_id, NotificationKind.MEMBER_BUDGET, member=member_email(member_id), **params)
        transaction.on_commit(lambda a=account_id, m=member_id: call_handler(a, REASON_MEMBER_BUDGET, member_id=m))


_handler: Callable[..., object] | None = None


def register_handler(handler: Callable[..., object]) -> None:
    """Set what stops a user's pay-as-you-go resources when they reach zero or their spending cap."""
    global _handler
    _handler = handler


def registered_handler() -> Callable[..., object] | None:
    return _handler


def call_handler(user_id: int, reason: str, *, member_id: int | None = None) -> None:
    """Call the registered arrears handler (for ``member_id``: only what that member runs on ``user_id``'s wallet);
    a failure is logged, never breaks metering."""
    if _handler is None:
        log.critical("no arrears handler is registered: user %s was not stopped (%s)", user_id, reason)
        return
    try:
        if member_id is None:
            _handler(user_id, reason)
        else:
            _handler(user_id, reason, member_id=member_id)
    except Exception:  # the handler belongs to another app; metering must go on whatever it does
        log.exception("arrears handler failed for user %s", user_id)


_listeners: list[Callable[[int], object]] = []


def register_listener(listener: Callable[[int], object]) -> None:
    """Add what is called with a new notification's id after its transaction commits (the notifications app
    registers the delivery to the user's channels; billing knows nothing of channels)."""
    if listener not in _listeners:
        _listeners.append(listener)


def registered_listeners() -> tuple[Callable[[int], object], ...]:
    return tuple(_listeners)


def notify(user_id: int, kind: str, **params) -> Notification:
    """Record a billing notification (shown on the dashboard), e-mail it and tell the listeners after commit."""
    notification = Notification.objects.create(user_id=user_id, kind=kind, params=params)
    transaction.on_commit(lambda: email_notification.delay(notification.pk))
    for listener in _listeners:
        transaction.on_commit(lambda listener=listener: listener(notification.pk))
    return notification


def reset_alerts(user_id: int) -> None:
    """After a top-up: the next low balance or arrears is news again."""
    Wallet.objects.filter(user_id=user_id).update(low_balance_alerted_at=None, arrears_alerted_at=None)
