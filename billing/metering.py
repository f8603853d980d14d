"""Per-minute metering: usage sessions opened and closed by the instances app, charged by a tick every minute.

The contract with ``instances`` (and endpoints, disks, storage):

* :func:`open_usage` starts metering a running resource at the quote's per-minute price, frozen for the run.
* :func:`close_usage` stops it and charges what is still due up to ``ended_at``.
* ``billing.tasks.meter`` runs :func:`meter` every 60 s: it charges every open session that is due. With
  ``METERING_POSTING_MINUTES`` above 1 a session is due every that many billed minutes (staggered by session),
  or every minute while its payer is at risk (``billing.rules.next_posting``); what is posted is the same money,
  in fewer, longer postings.

Billed minutes = ceil((min(now, ended_at) − started_at) / 60 s): every started minute is billed, at its start.
No drift: a session's ``charged`` always equals ``to_cents(payable_per_hour × billed_minutes / 60)``; each posting
charges the difference between that rounded running total and what was already charged. The subsidised part
is booked against its programme the same way.

Months: minute n started at ``started_at + (n − 1) min`` and is booked in that moment's local month, whatever
second of the minute the beat runs at and whatever the cadence: a posting holds one month's minutes and is dated
in that month (a posting made after midnight for minutes started before it is dated at the last of them). Minutes
whose charge rounds to ¥0 are posted too once their month is over or the run has ended, so the statement counts
every started minute. An end noticed late (after ticks charged past it) is corrected by :func:`close_usage`,
which gives those minutes back.

Overlapping ticks and dead workers: sessions are claimed in chunks with ``SELECT … FOR UPDATE SKIP LOCKED``
(PostgreSQL; SQLite serialises writers), re-read under the lock, and each chunk is one database transaction —
a worker that dies mid-tick loses only its uncommitted chunk, which the next tick charges. Each posting's
idempotency key names the session and the billed-minute boundary, so the same minute can never be booked twice.
"""

import copy
import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from decimal import Decimal

from django.db import IntegrityError, connection, transaction
from django.db.models import Q, Sum
from django.utils import timezone
from django.utils.translation import gettext as _

from core.errors import Conflict, ServiceError

from . import arrears, budgets, vouchers
from .bulk import bulk_set, instances
from .choices import COMPUTE_KINDS, WALLET_KINDS, AccountKind, TransactionKind, UsageKind
from .ledger import (
    Posting,
    SubsidyBooking,
    lock_programmes,
    lock_user_accounts,
    post_batch,
    programme_accounts,
    subsidy_used,
    system_account,
    user_accounts,
)
from .models import LedgerEntry, Plan, UsageSession, Voucher, Wallet
from .money import ZERO, summed
from .quote import Quote
from .rules import (
    billed_minutes,
    charge_entries,
    last_start_before,
    minute_started,
    minutes_cost,
    month_bounds,
    month_of,
    month_segments,
    next_posting,
    posting_minutes,
    split_payment,
    usable_trial,
    voucher_usable,
)

_author_shares = None


def register_author_shares(func) -> None:
    """Set how the image authors' revenue share of charges is found (the marketplace registers it at start)."""
    global _author_shares
    _author_shares = func


def registered_author_shares():
    return _author_shares


def author_shares(sessions):
    """The image authors' revenue share of these sessions' charges, as the marketplace computes it. Fails closed:
    with nothing registered no charge is posted (and the system checks refuse to start such a console)."""
    if _author_shares is None:
        raise RuntimeError("no image author revenue share is registered: refusing to post charges without it")
    return _author_shares(sessions)


CHUNK_SIZE = 1000


# The rules themselves live in ``billing.rules``; these names are how the metering tick reads.
due_amount = minutes_cost


# --- Opening and closing ----------------------------------------------------------------------------------------------


def open_usage(
    *, user, kind: str, resource_id: uuid.UUID, quote: Quote, started_at: datetime, label: str = "", member_id=None
):
    """Start metering ``resource_id`` from ``started_at`` at ``quote``'s price. Idempotent per (resource, start).
    ``member_id``: on a team's wallet, the member it runs for (their budget counts its charges).

    A prepaid (daily/monthly) quote opens a session metered at zero: the plan was charged up front.
    Raises Conflict if another session of the resource is still open.
    """
    if kind not in UsageKind.values:
        raise ServiceError(_("Unknown usage kind “%(kind)s”.") % {"kind": kind}, code="invalid_usage_kind")
    existing = UsageSession.objects.filter(resource_id=resource_id, started_at=started_at).first()
    if existing is not None:
        return existing
    period = Plan.objects.filter(slug=quote.plan_slug).values_list("period_minutes", flat=True).first()
    prepaid = bool(period and period > 1)
    user_accounts([user.pk])  # the tick then never has to create a wallet
    session = UsageSession(
        user=user,
        member_id=member_id,
        kind=kind,
        resource_id=resource_id,
        label=label[:200],
        started_at=started_at,
        charge_due_at=started_at,
        plan_slug=quote.plan_slug,
        prepaid=prepaid,
        chip_slug=quote.chip_slug or "",
        cards=quote.cards,
        zone_slug=quote.zone_slug or "",
        spot=quote.spot,
        list_per_hour=quote.list_per_hour,
        payable_per_hour=ZERO if prepaid else quote.payable_per_hour,
        subsidy_per_hour=ZERO if prepaid else quote.subsidy_per_hour,
        programme_id=quote.programme.id if quote.programme and not prepaid else None,
    )
    try:
        with transaction.atomic():
            session.save()
    except IntegrityError:
        existing = UsageSession.objects.filter(resource_id=resource_id, started_at=started_at).first()
        if existing is not None:
            return existing
        raise Conflict(
            _("This resource is already being metered; close its open session first."), code="usage_already_open"
        ) from None
    return session


def close_usage(*, resource_id: uuid.UUID, ended_at: datetime) -> UsageSession | None:
    """Stop metering the open session of ``resource_id`` and charge what is due up to ``ended_at``.

    Idempotent: None when no session is open. An end noticed late (a machine that died or was reclaimed minutes
    before reconcile saw it) finds minutes after it already charged: they are given back (:func:`_give_back`),
    so the run costs what its minutes up to ``ended_at`` cost, as the instance's page shows.
    """
    now = timezone.now()
    with transaction.atomic():
        # Waits for a tick that is charging this session rather than skipping it (a session left open would go on
        # billing a stopped resource). Then the owner's wallet row, before the ledger's accounts: the order every
        # other money path takes them in (the funds gate locks the wallet, then posts), so that a stop inside a
        # caller's transaction and a concurrent charge of the same user cannot deadlock when this charge raises an
        # alert that writes the wallet row.
        session = UsageSession.objects.open().filter(resource_id=resource_id).select_for_update().first()
        if session is None:
            return None
        Wallet.objects.bulk_create([Wallet(user_id=session.user_id)], ignore_conflicts=True)
        Wallet.objects.select_for_update().filter(user_id=session.user_id).first()
        session.ended_at = max(ended_at, session.started_at)
        UsageSession.objects.filter(pk=session.pk).update(ended_at=session.ended_at)
        outcome = charge_sessions([session], now)
        _give_back(session, now)
    arrears.follow_up(outcome.alerts, now)
    return session


# Giving back what was charged past a run's end, newest money first: the reverse of the order a charge is paid in.
_GIVE_BACK_ORDER = {AccountKind.USER_CASH: 0, AccountKind.USER_TRIAL: 1, AccountKind.USER_VOUCHER: 2}


def _give_back(session: UsageSession, now: datetime) -> None:
    """Give back the minutes a closed ``session`` was charged past its end, one posting per month they started
    in, booked in that month (so its statement, spend and the person's subsidy month lose them again).

    Why give back rather than never charge them: a machine's end is known only once reconcile notices it, and a
    minute is charged as it starts (arrears stop within a minute of zero); holding every charge until each machine
    is seen alive again would delay them all. The rare late end is corrected in the ledger instead.

    Each posting returns what the month's charges of the session took, newest first: to the cash, trial credit and
    vouchers that paid them (to cash when that trial credit or voucher has expired since: it cannot be spent any
    more), the programme's subsidy to the programme (what the operator bore is given back first). The key names
    the session and the minute count given back to, so it is posted once."""
    s = session
    minutes = billed_minutes(s.started_at, s.ended_at)
    if s.charged_minutes <= minutes:
        return
    revenue = system_account(AccountKind.REVENUE)
    cash = user_accounts([s.user_id])[s.user_id][AccountKind.USER_CASH]
    postings = []
    for month, after, upto in reversed(month_segments(s.started_at, minutes, s.charged_minutes)):
        payable = due_amount(s.payable_per_hour, upto) - due_amount(s.payable_per_hour, after)
        subsidy = due_amount(s.subsidy_per_hour, upto) - due_amount(s.subsidy_per_hour, after)
        entries, back, booked_back = _returned(s, month, payable, subsidy, cash.pk, now)
        unfunded_back = subsidy - booked_back
        entries.append((revenue.pk, -(payable + booked_back)))
        if booked_back:
            entries.append((programme_accounts([s.programme_id])[s.programme_id].pk, booked_back))
        postings.append(
            Posting(
                kind=TransactionKind.USAGE,
                idempotency_key=f"usage:{s.public_id}:{upto}:back-to:{after}",
                entries=tuple((a, amount) for a, amount in entries if amount) or ((revenue.pk, ZERO),),
                user_id=s.user_id,
                reference=s.label or str(s.resource_id),
                usage_session_id=s.pk,
                resource_id=s.resource_id,
                minutes=after - upto,
                subsidy=SubsidyBooking(s.programme_id, _cap_subject(s), month, -booked_back) if booked_back else None,
                at=now if month == month_of(now) else minute_started(s.started_at, upto),
                member_id=s.member_id,
            )
        )
        s.charged -= back
        s.subsidy_booked -= booked_back
        s.subsidy_unfunded -= unfunded_back
    s.charged_minutes = minutes
    post_batch(postings)
    bulk_set(UsageSession, [s], ["charged", "charged_minutes", "subsidy_booked", "subsidy_unfunded"])


def _returned(s, month, payable, subsidy, cash_id, now) -> tuple[list, Decimal, Decimal]:
    """What goes back to whom of ``payable`` (and ``subsidy``) charged to ``s`` in ``month``: the wallet entries,
    their sum, and the subsidy given back to the programme (at most what it paid for the session that month)."""
    start, end = month_bounds(month)
    charges = LedgerEntry.objects.filter(
        transaction__usage_session_id=s.pk,
        transaction__kind=TransactionKind.USAGE,
        transaction__minutes__gt=0,
        transaction__created_at__gte=start,
        transaction__created_at__lt=end,
    )
    paid = charges.filter(account__kind__in=WALLET_KINDS, amount__lt=0).order_by("-transaction__created_at", "-pk")
    rows = list(paid.values_list("transaction_id", "account_id", "account__kind", "account__expires_at", "amount"))
    rows.sort(key=lambda r: (-r[0], _GIVE_BACK_ORDER[r[2]]))  # newest charge first; in it, cash before credit
    spent_vouchers = set(
        Voucher.objects.filter(account_id__in={r[1] for r in rows}, expired_at__isnull=False).values_list(
            "account_id", flat=True
        )
    )
    to: dict[int, Decimal] = defaultdict(Decimal)
    left = payable
    for _tx, account, kind, expires_at, amount in rows:
        if left <= 0:
            break
        take = min(-amount, left)
        spendable = kind == AccountKind.USER_CASH or (
            expires_at is not None and expires_at > now and account not in spent_vouchers
        )
        to[account if spendable else cash_id] += take
        left -= take
    to[cash_id] += left  # nothing is left unless charges were posted out of their month: the wallet gets it all
    booked = -summed(charges.filter(account__kind=AccountKind.SUBSIDY).aggregate(t=Sum("amount"))["t"])
    booked_back = min(max(subsidy - s.subsidy_unfunded, ZERO), booked, s.subsidy_booked)
    return list(to.items()), payable, max(booked_back, ZERO)


# --- The tick ---------------------------------------------------------------------------------------------------------


@dataclass
class TickReport:
    sessions: int = 0
    charged: int = 0
    amount: Decimal = ZERO
    chunks: int = 0


@dataclass
class ChargeOutcome:
    charged: int = 0
    amount: Decimal = ZERO
    alerts: "arrears.Alerts" = field(default_factory=lambda: arrears.Alerts())


def _lock(queryset):
    if connection.features.has_select_for_update_skip_locked:
        return queryset.select_for_update(skip_locked=True)
    return queryset.select_for_update()


def meter(now: datetime | None = None, *, chunk_size: int = CHUNK_SIZE) -> TickReport:
    """Charge every open session that is due up to ``now``: one database transaction per chunk of sessions."""
    now = now or timezone.now()
    report = TickReport()
    last_pk = 0
    # A session not yet scheduled (one written without ``charge_due_at``) is due: a session is never left unbilled.
    # So is one scheduled further off than the cadence allows (the cadence was shortened since).
    due = (
        Q(charge_due_at__lt=now)
        | Q(charge_due_at__isnull=True, started_at__lt=now)
        | Q(charge_due_at__gte=now + timedelta(minutes=posting_minutes()), started_at__lt=now)
    )
    while True:
        with transaction.atomic():
            chunk = instances(
                _lock(UsageSession.objects.open().filter(due, pk__gt=last_pk)).order_by("pk")[:chunk_size]
            )
            if not chunk:
                break
            last_pk = chunk[-1].pk
            outcome = charge_sessions(chunk, now)
        report.chunks += 1
        report.sessions += len(chunk)
        report.charged += outcome.charged
        report.amount += outcome.amount
        arrears.follow_up(outcome.alerts, now)
    return report


@dataclass
class _Due:
    """What one posting books for a session: billed minutes ``after`` (exclusive) to ``minutes`` (inclusive), all
    started in ``month``, dated ``at`` (a moment of that month)."""

    session: UsageSession
    minutes: int
    payable: Decimal
    subsidy: Decimal
    month: date
    at: datetime
    after: int = 0
    charged: UsageSession | None = None  # the session as it stands after this posting


def _dues(sessions, now) -> tuple[list[_Due], dict[int, int]]:
    """What is due on each session, and every session's billed minutes up to ``now`` (to schedule the next look).

    One due per month the unposted minutes started in: a minute is booked in the month it started, whenever the
    tick gets to it. Minutes whose charge rounds to nothing yet wait for a later tick, unless their month is over
    or the session has ended: then they are posted at ¥0, so that the statement counts every started minute."""
    dues, billed = [], {}
    this_month = month_of(now)
    month_start = month_bounds(this_month)[0]
    for s in sessions:
        minutes = billed[s.pk] = billed_minutes(s.started_at, min(now, s.ended_at) if s.ended_at else now)
        if minutes <= s.charged_minutes:
            continue
        charged, subsidised = s.charged, s.subsidy_booked + s.subsidy_unfunded
        if minute_started(s.started_at, s.charged_minutes + 1) >= month_start:  # all of them this month
            segments = [(this_month, s.charged_minutes, minutes)]
        else:
            segments = month_segments(s.started_at, s.charged_minutes, minutes)
        for month, after, upto in segments:
            payable = due_amount(s.payable_per_hour, upto) - charged
            subsidy = due_amount(s.subsidy_per_hour, upto) - subsidised
            settled = month < this_month or s.ended_at is not None
            if payable > 0 or subsidy > 0 or (settled and not s.prepaid):
                at = now if month == this_month else minute_started(s.started_at, upto)
                dues.append(_Due(s, upto, payable, max(subsidy, ZERO), month, at, after))
                charged, subsidised = charged + payable, subsidised + max(subsidy, ZERO)
    return dues, billed


def _schedule(sessions, billed: dict[int, int], alerts, now, expiring=frozenset()) -> None:
    """Set when the tick next looks at each session: after ``posting_minutes()`` billed minutes, or the next minute
    when its payer is at risk (within an hour of spend of zero, stopped, capped, a member under a budget, or
    holding trial credit or a voucher that expires before then, so each minute is paid from what was usable in it).
    Never after the start of the session's last minute in this month, so that the month's minutes are posted before
    it ends when the beat allows (a posting after midnight still books them in their month: ``_dues``)."""
    every = posting_minutes()
    users, members = alerts.at_risk()
    users = users | set(expiring)
    month_end = month_bounds(month_of(now))[1]
    for s in sessions:
        at_risk = every == 1 or s.user_id in users or (s.user_id, s.member_id) in members
        due = next_posting(s.started_at, billed[s.pk], every=1 if at_risk else every, phase=s.pk)
        last = last_start_before(s.started_at, month_end)
        s.charge_due_at = due if at_risk or last <= minute_started(s.started_at, billed[s.pk]) else min(due, last)
    if every > 1 and (users or members):
        _bring_forward(users, members, now=now, besides=[s.pk for s in sessions])


def _expiring(buckets, held, voucher_left, now) -> set[int]:
    """The payers holding usable trial credit or a voucher that expires before the longer cadence's next posting."""
    every = posting_minutes()
    if every == 1:
        return set()
    soon = now + timedelta(minutes=every)
    found = {
        uid
        for uid, b in buckets.items()
        if usable_trial(b[AccountKind.USER_TRIAL], now) and b[AccountKind.USER_TRIAL].expires_at < soon
    }
    for uid, vouchers_held in held.items():
        if any(h.expires_at < soon and voucher_left.get(h.account_id, ZERO) > 0 for h in vouchers_held):
            found.add(uid)
    return found


def _bring_forward(users, members, *, now, besides) -> None:
    """The at-risk payers' other open sessions, scheduled further off on the longer cadence, are looked at by the
    next tick. Sessions another tick holds are skipped: that tick schedules them itself."""
    whose = Q(user_id__in=users)
    for account, member in members:
        whose |= Q(user_id=account, member_id=member)
    later = UsageSession.objects.open().filter(whose, charge_due_at__gte=now + timedelta(minutes=1))
    ids = list(_lock(later.exclude(pk__in=besides)).values_list("pk", flat=True))
    if ids:
        UsageSession.objects.filter(pk__in=ids).update(charge_due_at=None)


def charge_sessions(sessions: list[UsageSession], now: datetime) -> ChargeOutcome:
    """Charge what is due on ``sessions`` (locked by the caller, in its transaction) in one batch posting."""
    outcome = ChargeOutcome()
    dues, billed = _dues(sessions, now)
    if not dues:
        _schedule(sessions, billed, outcome.alerts, now)
        bulk_set(UsageSession, sessions, ["charge_due_at"])
        return outcome
    revenue = system_account(AccountKind.REVENUE)
    funded_by = programme_accounts({d.session.programme_id for d in dues if d.subsidy > 0 and d.session.programme_id})
    user_ids = {d.session.user_id for d in dues}
    # Authors of community images earn a share of what others spend on them, posted in this batch. Their
    # wallets are locked with the payers' (one statement, primary-key order), so two batches cannot deadlock.
    shares = author_shares([d.session for d in dues])
    # The payers' vouchers are locked with their wallets and spent from their locked balances.
    held = vouchers.held(user_ids, now)
    voucher_ids = [h.account_id for hs in held.values() for h in hs]
    extra = [revenue.pk, *(a.pk for a in funded_by.values()), *shares.account_ids, *voucher_ids]
    locked = lock_user_accounts(user_ids | shares.author_ids, extra)
    voucher_left = {pk: locked[pk].balance for pk in voucher_ids if voucher_usable(locked[pk], now)}
    buckets: dict[int, dict[str, object]] = defaultdict(dict)
    for account in locked.values():
        if account.user_id in user_ids:
            buckets[account.user_id][account.kind] = account
    programmes = lock_programmes(funded_by)
    used = {}  # (programme, person, month): what the person has received in the month a charge's minutes started
    for month in {d.month for d in dues}:
        pairs = {(pid, _cap_subject(d.session)) for d in dues if (pid := d.session.programme_id) in funded_by}
        used |= {(p, u, month): amount for (p, u), amount in subsidy_used(pairs, month).items()}
    trial_left = {uid: usable_trial(b[AccountKind.USER_TRIAL], now) for uid, b in buckets.items()}
    budget_left = {pid: None if p.budget is None else max(p.budget - p.spent, ZERO) for pid, p in programmes.items()}
    context = (buckets, trial_left, held, voucher_left, revenue, funded_by, programmes, used, budget_left, now)
    postings = []
    for due in dues:
        postings.append(_posting(due, *context))
        outcome.charged += 1
        outcome.amount += due.payable
    # Each charge with its session as it stood just after it (a session may have one charge per month in a batch).
    charges = [(d.charged, d.payable, p.idempotency_key) for d, p in zip(dues, postings, strict=True)]
    postings += shares.postings(charges, now)
    post_batch(postings, locked=locked, programmes=programmes)
    outcome.alerts = arrears.assess(buckets, now, vouchers=_covering_running(dues, held, voucher_left, now))
    outcome.alerts.budget, outcome.alerts.budgeted = budgets.assess([d.session for d in dues], now)
    _schedule(sessions, billed, outcome.alerts, now, _expiring(buckets, held, voucher_left, now))
    bulk_set(
        UsageSession,
        sessions,
        ["charged", "charged_minutes", "subsidy_booked", "subsidy_unfunded", "charge_due_at"],
    )
    return outcome


def _covering_running(dues, held, voucher_left, now) -> dict:
    """What each payer's vouchers hold, after this batch, for what the payer still runs: a voucher for other
    chips keeps no one from the low-balance warning or the arrears stop."""
    totals: dict[int, Decimal] = {}
    for due in dues:
        s = due.session
        if s.ended_at is not None or s.user_id not in held:
            continue
        charge = {
            "kind": s.kind,
            "chip": s.chip_slug,
            "zone": s.zone_slug,
            "plan": s.plan_slug,
            "amount": ZERO,
            "prepaid": False,
        }
        for account_id, left in vouchers.covering(held[s.user_id], voucher_left, now, **charge):
            totals.setdefault(s.user_id, {})[account_id] = left
    return {uid: sum(by_account.values(), ZERO) for uid, by_account in totals.items()}


def _posting(due, buckets, trial_left, held, voucher_left, revenue, funded_by, programmes, used, budget_left, now):
    s = due.session
    cash = buckets[s.user_id][AccountKind.USER_CASH]
    trial = buckets[s.user_id][AccountKind.USER_TRIAL]
    cover = vouchers.covering(
        held.get(s.user_id, []),
        voucher_left,
        now,
        kind=s.kind,
        chip=s.chip_slug,
        zone=s.zone_slug,
        plan=s.plan_slug,
        amount=due.payable,
        prepaid=False,
    )
    payment = split_payment(due.payable, trial_left[s.user_id], compute=s.kind in COMPUTE_KINDS, vouchers=cover)
    trial_left[s.user_id] -= payment.from_trial
    for account_id, amount in payment.from_vouchers:
        voucher_left[account_id] -= amount
    booked = _fund_subsidy(due, programmes, used, budget_left) if s.programme_id in funded_by else ZERO
    programme_account = funded_by[s.programme_id].pk if booked else None
    entries = charge_entries(
        trial=trial.pk,
        cash=cash.pk,
        revenue=revenue.pk,
        payable=due.payable,
        payment=payment,
        subsidy_account=programme_account,
        subsidy=booked,
    )
    minutes = due.minutes - due.after
    s.charged += due.payable
    s.charged_minutes = due.minutes
    s.subsidy_booked += booked
    s.subsidy_unfunded += due.subsidy - booked
    due.charged = copy.copy(s)
    return Posting(
        kind=TransactionKind.USAGE,
        idempotency_key=f"usage:{s.public_id}:{due.minutes}",
        entries=entries,
        user_id=s.user_id,
        reference=s.label or str(s.resource_id),
        usage_session_id=s.pk,
        resource_id=s.resource_id,
        minutes=minutes,
        subsidy=SubsidyBooking(s.programme_id, _cap_subject(s), due.month, booked) if booked else None,
        at=due.at,
        member_id=s.member_id,
    )


def _cap_subject(session) -> int:
    """Whose monthly subsidy cap a charge counts against: the person's. On a team's wallet that is the member it
    ran for, so a person's cap is one however many teams they launch through."""
    return session.member_id or session.user_id


def _fund_subsidy(due, programmes, used, budget_left) -> Decimal:
    """What the programme pays of this charge: all of it, unless its budget or the person's cap runs out."""
    s = due.session
    programme = programmes[s.programme_id]
    key = (s.programme_id, _cap_subject(s), due.month)
    limits = [budget_left[s.programme_id]]
    if programme.monthly_cap_per_user is not None:
        limits.append(max(programme.monthly_cap_per_user - used.get(key, ZERO), ZERO))
    limits = [x for x in limits if x is not None]
    booked = min([due.subsidy, *limits])
    if budget_left[s.programme_id] is not None:
        budget_left[s.programme_id] -= booked
    used[key] = used.get(key, ZERO) + booked
    return booked
