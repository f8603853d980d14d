"""Wallets: balances, the trial credit, launch checks, up-front charges, the spending cap, adjustments.

A user's wallet is ledger buckets: cash (top-ups), the trial credit (¥10 on e-mail verification, for compute only,
spent before cash, expiring) and any vouchers (``billing.vouchers``: each pays for the compute it covers, before
the trial credit, until it expires). ``compute_balance`` is cash plus unexpired trial credit plus usable vouchers;
the monthly spending cap counts everything the wallet pays, trial credit and vouchers included.
"""

from dataclasses import dataclass
from datetime import date, datetime, timedelta
from decimal import Decimal, InvalidOperation
from types import SimpleNamespace

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import Subquery, Sum
from django.utils import timezone
from django.utils.translation import gettext as _

from core.errors import PaymentRequired, ServiceError

from . import arrears, hourly, rules, spend, vouchers
from .choices import COMPUTE_KINDS, AccountKind, NotificationKind, TransactionKind, UsageKind
from .display import format_cny, format_cny_rate
from .ledger import (
    InsufficientFunds,
    Posting,
    SubsidyBooking,
    available_subsidy,
    lock_accounts,
    lock_programmes,
    look_again,
    post,
    post_batch,
    programme_accounts,
    subsidy_used,
    system_account,
    user_accounts,
)
from .metering import author_shares
from .models import Account, LedgerTransaction, Plan, TrialGrant, UsageSession, Wallet
from .money import AMOUNT_TEXT_MESSAGE, CENT, ZERO, is_plain_amount, to_cents, to_rate
from .quote import Quote

MAX_SPENDING_CAP = Decimal("10000000")


def normalise_email(email: str) -> str:
    """The address a trial credit is keyed on: lower case, without a "+tag" (one grant per mailbox)."""
    local, _at, domain = (email or "").strip().lower().rpartition("@")
    return f"{local.split('+', 1)[0]}@{domain}" if local else domain


def trial_amount() -> Decimal:
    return Decimal(str(settings.TRIAL_CREDIT_CNY)).quantize(CENT)


# --- Reading ----------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class WalletSummary:
    """What the wallet page, the dashboard and the API show."""

    cash: Decimal
    trial: Decimal
    trial_expires_at: datetime | None
    spending_cap: Decimal | None
    month_spent: Decimal
    hourly_spend: Decimal
    voucher_balance: Decimal = ZERO  # what the usable vouchers hold (each pays only for the compute it covers)
    vouchers: tuple = ()  # billing.vouchers.VoucherView, usable first: read for the wallet page and API only

    @property
    def compute_balance(self) -> Decimal:
        return self.cash + self.trial + self.voucher_balance

    @property
    def hours_left(self) -> Decimal | None:
        if self.hourly_spend <= 0:
            return None
        return max(self.compute_balance, ZERO) / self.hourly_spend

    @property
    def low(self) -> bool:
        return self.hourly_spend > 0 and self.compute_balance < self.hourly_spend

    @property
    def cap_left(self) -> Decimal | None:
        return None if self.spending_cap is None else max(self.spending_cap - self.month_spent, ZERO)


_UNREAD = object()


def _buckets(user, now, *, with_vouchers=False):
    """(cash, usable trial credit, its expiry), and with ``with_vouchers`` what usable vouchers hold, whether the
    wallet holds any voucher at all (each has an account, spent or not) and the monthly spending cap, read beside
    the accounts (``_UNREAD`` when the user has no account to read it with): one query."""
    cash, trial, expires, held, any_voucher, cap = ZERO, ZERO, None, ZERO, False, _UNREAD
    user_id = getattr(user, "pk", user)
    kinds = [AccountKind.USER_CASH, AccountKind.USER_TRIAL] + ([AccountKind.USER_VOUCHER] if with_vouchers else [])
    accounts = Account.objects.filter(user_id=user_id, kind__in=kinds)
    if with_vouchers:
        accounts = accounts.annotate(cap=Subquery(Wallet.objects.filter(user_id=user_id).values("spending_cap")[:1]))
    for account in accounts:
        cap = getattr(account, "cap", cap)
        if account.kind == AccountKind.USER_CASH:
            cash = account.balance
        elif account.kind == AccountKind.USER_VOUCHER:
            any_voucher = True
            held += account.balance if rules.voucher_usable(account, now) else ZERO
        elif rules.trial_usable(account, now):
            trial, expires = account.balance, account.expires_at
    return (cash, trial, expires, held, any_voucher, cap) if with_vouchers else (cash, trial, expires)


def compute_balance(user) -> Decimal:
    """Cash plus unexpired trial credit: what compute may spend."""
    cash, trial, _expires = _buckets(user, timezone.now())
    return cash + trial


def month_spent(user, now: datetime | None = None) -> Decimal:
    """What the user spent this calendar month (usage, prepaid plans, storage), from the running sums."""
    return spend.month_spent(user, rules.month_of(now or timezone.now()))


def hourly_spend(user, billing_now: list[hourly.BillingNow] | None = None) -> Decimal:
    """What the user's open sessions cost per hour together: the sum of what each kind of resource costs
    (``billing_now``, read here unless the caller has it)."""
    parts = hourly.billing_now(user) if billing_now is None else billing_now
    return to_rate(sum((part.per_hour for part in parts), ZERO))


def summary(
    user,
    *,
    list_vouchers: bool = False,
    billing_now: list[hourly.BillingNow] | None = None,
    recent: "RecentSpend | None" = None,
) -> WalletSummary:
    """The wallet's balances; ``list_vouchers`` also reads each voucher (the wallet page and API show them).
    ``billing_now``: the caller's :func:`billing.hourly.billing_now`, which the hourly spend adds up; ``recent``: the
    caller's :func:`recent_spend`, which holds this month's spend."""
    now = timezone.now()
    cash, trial, expires, held, any_voucher, cap = _buckets(user, now, with_vouchers=True)
    if cap is _UNREAD:
        cap = Wallet.objects.filter(user_id=getattr(user, "pk", user)).values_list("spending_cap", flat=True).first()
    return WalletSummary(
        cash=cash,
        trial=trial,
        trial_expires_at=expires,
        spending_cap=cap,
        month_spent=month_spent(user, now) if recent is None else recent.month(now),
        hourly_spend=hourly_spend(user, billing_now),
        voucher_balance=held,
        vouchers=tuple(vouchers.vouchers_of(user)) if list_vouchers and any_voucher else (),
    )


CHART_DAYS = 30


@dataclass(frozen=True)
class RecentSpend:
    """The wallet's spend per quarter-hour since the earlier of this month's start and the chart's first day: what
    both the month's total and the daily chart add up, read once for a page that shows both."""

    quarters: list[tuple[datetime, Decimal]]

    def month(self, now: datetime) -> Decimal:
        """This month's spend, as :func:`month_spent` sums it in the database (integer fen: the same to the fen)."""
        start, end = rules.month_bounds(rules.month_of(now))
        return sum((amount for quarter, amount in self.quarters if start <= quarter < end), ZERO)


def _chart_start(days: int) -> tuple[date, datetime]:
    first = timezone.localdate() - timedelta(days=days - 1)
    return first, timezone.make_aware(datetime.combine(first, datetime.min.time()))


def recent_spend(user) -> RecentSpend:
    """What :func:`summary` and :func:`daily_spend` read of the running sums, in one query."""
    month_start, _end = rules.month_bounds(rules.month_of(timezone.now()))
    return RecentSpend(spend.per_quarter(user, min(month_start, _chart_start(CHART_DAYS)[1])))


def daily_spend(user, days: int = CHART_DAYS, recent: RecentSpend | None = None) -> list[tuple[date, Decimal]]:
    """Spend per local day for the last ``days`` days, oldest first, zero-filled (one query, none with the
    caller's ``recent`` spend).

    The running sums are per quarter-hour; every UTC offset (and every summer-time shift) is a multiple of 15
    minutes, so each quarter falls on one local day and each day is exact.
    """
    first, start = _chart_start(days)
    quarters = spend.per_quarter(user, start) if recent is None else recent.quarters
    spent: dict[date, Decimal] = {}
    for quarter, amount in quarters:
        if quarter >= start:
            day = timezone.localdate(quarter)
            spent[day] = spent.get(day, ZERO) + amount
    return [(first + timedelta(days=i), spent.get(first + timedelta(days=i), ZERO)) for i in range(days)]


def needed_to_launch(quote: Quote) -> Decimal:
    """What the gate asks to be there for a launch: one hour pay-as-you-go, or the whole prepaid term."""
    period = Plan.objects.filter(slug=quote.plan_slug).values_list("period_minutes", flat=True).first()
    if period and period > 1:
        return quote.payable_total
    return to_cents(quote.payable_per_hour)


def check_launch_funds(user, quote: Quote, *, pending_per_hour: Decimal = ZERO) -> None:
    """The funds gate for compute: one hour pay-as-you-go, or the whole prepaid plan (see :func:`require_funds`).
    The vouchers that would pay for this launch count with the balance."""
    needed = needed_to_launch(quote)
    prepaid = needed == quote.payable_total and needed != to_cents(quote.payable_per_hour)
    charge = {"chip": quote.chip_slug or "", "zone": quote.zone_slug or "", "plan": quote.plan_slug}
    held = vouchers.covering_total(
        user, timezone.now(), kind=UsageKind.INSTANCE, amount=needed, prepaid=prepaid, **charge
    )
    require_funds(user, needed, compute=True, pending_per_hour=pending_per_hour, upfront=prepaid, vouchers=held)


def lock_wallet(user) -> Wallet:
    """Lock ``user``'s wallet row for the rest of the transaction: the funds checks of one user queue here."""
    Wallet.objects.bulk_create([Wallet(user=user)], ignore_conflicts=True)
    return Wallet.objects.select_for_update().get(user=user)


def _committed_per_hour(user, *, compute: bool, trial: Decimal, pending_per_hour: Decimal) -> Decimal:
    """One hour of what already bills (open sessions, plus launches on their way up): the part of the balance the
    gate keeps for it. Cash-only resources count only what cash must pay: the trial credit carries compute."""
    rows = UsageSession.objects.open().filter(user=user).values_list("kind").annotate(total=Sum("payable_per_hour"))
    per_kind = {kind: Decimal(total) for kind, total in rows.values_list("kind", "total")}
    on_compute = sum((v for k, v in per_kind.items() if k in COMPUTE_KINDS), ZERO) + pending_per_hour
    others = sum((v for k, v in per_kind.items() if k not in COMPUTE_KINDS), ZERO)
    if compute:
        return to_cents(on_compute + others)
    return to_cents(others + max(on_compute - trial, ZERO))


def require_funds(
    user, needed: Decimal, *, compute: bool, pending_per_hour: Decimal = ZERO, upfront=False, vouchers=ZERO
) -> None:
    """The one funds and arrears gate that every resource that bills passes before it starts, resumes or grows.

    ``needed`` is one hour of the new resource (or its prepaid term, ``upfront``). It must fit in the balance left
    after one hour of everything the user already runs; a user in arrears (negative cash) starts nothing; compute
    may spend the trial credit and ``vouchers`` (what the user's vouchers hold for it), other resources
    (``compute=False``) only cash. The monthly spending cap applies.

    Call it inside the transaction that creates the resource: it locks the user's wallet row, so concurrent
    requests of one user are checked one after another, each seeing what the one before committed.
    """
    if not connection.in_atomic_block:
        raise RuntimeError("require_funds must run inside the transaction that creates the resource")
    wallet = lock_wallet(user)
    now = timezone.now()
    cash, trial, _expires = _buckets(user, now)
    if cash < 0:
        raise PaymentRequired(
            _("Your balance is in arrears (%(cash)s): top up before starting anything that bills.")
            % {"cash": format_cny(cash)},
            code="in_arrears",
        )
    balance = cash + trial + vouchers if compute else cash
    committed = _committed_per_hour(user, compute=compute, trial=trial, pending_per_hour=pending_per_hour)
    if balance - committed < needed or balance <= 0:
        raise PaymentRequired(_insufficient(needed, balance, committed, compute), code="insufficient_balance")
    if wallet.spending_cap is not None:
        spent = month_spent(user, now)
        if spent >= wallet.spending_cap or (upfront and spent + needed > wallet.spending_cap):
            raise PaymentRequired(
                _("This would pass your monthly spending cap of %(cap)s (%(spent)s spent this month).")
                % {"cap": format_cny(wallet.spending_cap), "spent": format_cny(spent)},
                code="spending_cap_reached",
            )


def _insufficient(needed: Decimal, balance: Decimal, committed: Decimal, compute: bool) -> str:
    # What runs for an hour reads as a rate (a small disk's hour costs less than a fen); the balance as a total.
    values = {
        "needed": format_cny_rate(needed),
        "balance": format_cny(balance),
        "committed": format_cny_rate(committed),
    }
    if committed > 0:
        message = _(
            "This needs %(needed)s for its first hour, and %(committed)s of your %(balance)s balance is kept for "
            "one hour of what you already run. Top up or stop something to continue."
        )
    elif compute:
        message = _("Launching needs %(needed)s and your balance is %(balance)s. Top up to continue.")
    else:
        message = _(
            "This needs %(needed)s for its first hour and your cash balance is %(balance)s. Top up to continue."
        )
    if not compute:
        message += " " + _("Cloud disks and storage are paid from cash; the trial credit pays for compute only.")
    return message % values


# --- Charging ---------------------------------------------------------------------------------------------------------


def charge_upfront(
    *, user, quote: Quote, resource_id, idempotency_key: str, kind: str = UsageKind.INSTANCE, member_id=None
) -> LedgerTransaction:
    """Charge a daily or monthly plan in full before it starts: covering vouchers, then trial credit, then cash.

    The subsidised part is booked against its programme, limited by what the programme and the user's monthly cap
    have left at this moment (the operator bears any shortfall: the quoted price is the price paid). An instance
    booting another user's community image pays its author the share of this charge in the same batch, exactly as
    metering does for pay-as-you-go minutes.
    """
    amount, subsidy = quote.payable_total, quote.subsidy_total
    programme_id = quote.programme.id if quote.programme and subsidy > 0 else None
    with transaction.atomic():
        accounts = user_accounts([user.pk])[user.pk]
        revenue = system_account(AccountKind.REVENUE)
        funded_by = programme_accounts([programme_id] if programme_id else [])
        # The author's share follows the same rule as metered minutes: ``kind`` is the usage kind of the resource.
        charge = SimpleNamespace(kind=kind, resource_id=resource_id, user_id=user.pk, charged=amount)
        shares = author_shares([charge])
        cash, trial = accounts[AccountKind.USER_CASH], accounts[AccountKind.USER_TRIAL]
        now = timezone.now()
        held = vouchers.held([user.pk], now).get(user.pk, [])
        ids = [cash.pk, trial.pk, revenue.pk, *(a.pk for a in funded_by.values()), *shares.account_ids]
        locked = lock_accounts([*ids, *(h.account_id for h in held)])
        done = LedgerTransaction.objects.filter(idempotency_key=idempotency_key).first()
        if done is not None:
            return done
        cash, trial = locked[cash.pk], locked[trial.pk]
        usable_trial = rules.usable_trial(trial, now)
        left = {h.account_id: locked[h.account_id].balance for h in held}
        cover = vouchers.covering(
            held,
            left,
            now,
            kind=kind,
            chip=quote.chip_slug or "",
            zone=quote.zone_slug or "",
            plan=quote.plan_slug,
            amount=amount,
            prepaid=True,
        )
        payment = rules.split_payment(amount, usable_trial, compute=kind in COMPUTE_KINDS, vouchers=cover)
        if payment.from_cash > max(cash.balance, ZERO):
            held_total = sum((a for _v, a in payment.from_vouchers), ZERO)
            raise InsufficientFunds(
                _("The plan costs %(amount)s up front and your balance is %(balance)s. Top up to continue.")
                % {"amount": format_cny(amount), "balance": format_cny(cash.balance + usable_trial + held_total)},
            )
        programmes = lock_programmes([programme_id] if programme_id else [])
        booking = None
        if programme_id:
            month = rules.month_of(now)
            subject = member_id or user.pk  # a person's cap, also when they launch on a team's wallet
            used = subsidy_used([(programme_id, subject)], month).get((programme_id, subject), ZERO)
            limit = available_subsidy(programmes[programme_id], used)
            booked = subsidy if limit is None else min(subsidy, limit)
            booking = SubsidyBooking(programme_id, subject, month, booked) if booked > 0 else None
        entries = rules.charge_entries(
            trial=trial.pk,
            cash=cash.pk,
            revenue=revenue.pk,
            payable=amount,
            payment=payment,
            subsidy_account=funded_by[programme_id].pk if booking else None,
            subsidy=booking.amount if booking else ZERO,
        )
        posting = Posting(
            kind=TransactionKind.UPFRONT,
            idempotency_key=idempotency_key,
            entries=entries,
            user_id=user.pk,
            reference=f"{quote.plan_name} · {quote.chip_name}"[:255],
            resource_id=resource_id,
            subsidy=booking,
            at=now,
            member_id=member_id,
        )
        payouts = shares.postings([(charge, amount, idempotency_key)], now)
        return post_batch([posting, *payouts], locked=locked, programmes=programmes)[0]


# --- Trial credit -----------------------------------------------------------------------------------------------------


def grant_trial_credit(user, email: str) -> LedgerTransaction | None:
    """Grant the trial credit for a newly verified address: once per address ever, and once per user.

    Returns the grant's transaction, or None when this address or this user already had one.
    """
    amount = trial_amount()
    address = normalise_email(email)
    if amount <= 0 or not address:
        return None
    now = timezone.now()
    expires = now + timedelta(days=settings.TRIAL_CREDIT_DAYS)
    with transaction.atomic():
        try:
            with transaction.atomic():
                TrialGrant.objects.create(user=user, email=address, amount=amount, granted_at=now, expires_at=expires)
        except IntegrityError:
            return None
        trial = user_accounts([user.pk])[user.pk][AccountKind.USER_TRIAL]
        funding = system_account(AccountKind.TRIAL_FUNDING)
        locked = lock_accounts([trial.pk, funding.pk])
        Account.objects.filter(pk=trial.pk).update(expires_at=expires)
        locked[trial.pk].expires_at = expires
        return post(
            Posting(
                kind=TransactionKind.TRIAL_GRANT,
                idempotency_key=f"trial-grant:{address}",
                entries=((funding.pk, -amount), (trial.pk, amount)),
                user_id=user.pk,
                reason=_("Trial credit for verifying %(email)s") % {"email": address},
                at=now,
            ),
            locked=locked,
        )


def expire_trial_credits(now: datetime | None = None, limit: int = 1000) -> int:
    """Book the expiry of every trial credit past its date (a ledger transaction, not a delete). Idempotent."""
    now = now or timezone.now()
    due = list(
        TrialGrant.objects.filter(expired_at__isnull=True, expires_at__lte=now, user__isnull=False).order_by("pk")[
            :limit
        ]
    )
    for grant in due:
        _expire(grant, now)
    return len(due)


def _expire(grant: TrialGrant, now: datetime) -> None:
    with transaction.atomic():
        trial = user_accounts([grant.user_id])[grant.user_id][AccountKind.USER_TRIAL]
        funding = system_account(AccountKind.TRIAL_FUNDING)
        locked = lock_accounts([trial.pk, funding.pk])
        claimed = TrialGrant.objects.filter(pk=grant.pk, expired_at__isnull=True).update(expired_at=now)
        remaining = locked[trial.pk].balance
        if not claimed or remaining <= 0:
            return
        post(
            Posting(
                kind=TransactionKind.TRIAL_EXPIRY,
                idempotency_key=f"trial-expiry:{grant.pk}",
                entries=((trial.pk, -remaining), (funding.pk, remaining)),
                user_id=grant.user_id,
                reason=_("Trial credit expired"),
                at=now,
            ),
            locked=locked,
        )
        arrears.notify(grant.user_id, NotificationKind.TRIAL_EXPIRED, amount=str(remaining))


# --- Cash: withdrawals and adjustments --------------------------------------------------------------------------------


def parse_amount(value, *, field: str = "amount") -> Decimal:
    """An amount in yuan with at most two decimals, or a ServiceError saying what is wrong. Text must be written
    the one plain way (``money.is_plain_amount``: ASCII digits, "-" and "."); callers refuse a negative amount
    where it means nothing. A ``Decimal`` or ``int`` from code is taken as it is."""
    if isinstance(value, Decimal | int) and not isinstance(value, bool):
        amount = Decimal(value)
    else:
        text = str(value).strip()
        if not is_plain_amount(text):
            raise ServiceError(AMOUNT_TEXT_MESSAGE, code="invalid_amount")
        try:
            amount = Decimal(text)
        except InvalidOperation as exc:  # cannot happen for plain text; kept so a future rule change fails clearly
            raise ServiceError(AMOUNT_TEXT_MESSAGE, code="invalid_amount") from exc
    if not amount.is_finite():
        raise ServiceError(_("The amount must be a number of yuan, e.g. 50 or 49.90."), code="invalid_amount")
    if amount.quantize(CENT) != amount:
        raise ServiceError(_("The amount can have at most two decimal places (fen)."), code="invalid_amount")
    return amount.quantize(CENT)


def withdraw_cash(*, user, amount, idempotency_key: str, reason: str = "", staff=None) -> LedgerTransaction:
    """Pay cash back out to the user (staff action). Only cash can be withdrawn — never the trial credit."""
    amount = parse_amount(amount)
    if amount <= 0:
        raise ServiceError(_("The amount must be greater than zero."), code="invalid_amount")
    with transaction.atomic():
        cash = user_accounts([user.pk])[user.pk][AccountKind.USER_CASH]
        clearing = system_account(AccountKind.PAYMENT_CLEARING)
        return post(
            Posting(
                kind=TransactionKind.WITHDRAWAL,
                idempotency_key=idempotency_key,
                entries=((cash.pk, -amount), (clearing.pk, amount)),
                user_id=user.pk,
                reason=reason,
                created_by_id=staff.pk if staff else None,
            )
        )


def adjust_balance(*, user, amount, reason: str, staff, idempotency_key: str) -> LedgerTransaction:
    """A staff correction of a user's cash (positive credits, negative debits), with a reason, audited."""
    amount = parse_amount(amount)
    reason = (reason or "").strip()
    if not reason:
        raise ServiceError(_("Give a reason for the adjustment."), code="reason_required")
    if amount == 0:
        raise ServiceError(_("The amount must not be zero."), code="invalid_amount")
    with transaction.atomic():
        cash = user_accounts([user.pk])[user.pk][AccountKind.USER_CASH]
        adjustments = system_account(AccountKind.ADJUSTMENTS)
        return post(
            Posting(
                kind=TransactionKind.ADJUSTMENT,
                idempotency_key=idempotency_key,
                entries=((adjustments.pk, -amount), (cash.pk, amount)),
                user_id=user.pk,
                reason=reason,
                created_by_id=staff.pk if staff else None,
            )
        )


# --- The spending cap -------------------------------------------------------------------------------------------------


def set_spending_cap(user, cap) -> Wallet:
    """Set (or clear, with None or "") the user's monthly spending cap."""
    if cap in (None, ""):
        value = None
    else:
        value = parse_amount(cap, field="spending_cap")
        if value < 0 or value > MAX_SPENDING_CAP:
            raise ServiceError(
                _("The spending cap must be between ¥0 and ¥%(max)s.") % {"max": MAX_SPENDING_CAP},
                code="invalid_spending_cap",
            )
    wallet, _created = Wallet.objects.get_or_create(user=user)
    wallet.spending_cap = value
    wallet.arrears_alerted_at = None
    wallet.save(update_fields=["spending_cap", "arrears_alerted_at"])
    look_again([user.pk])  # the tick then watches the cap from its next run, whatever the posting cadence
    return wallet
