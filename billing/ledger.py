"""The ledger: the one function that moves money, the accounts it moves it between, and the check.

Every movement of money is a :class:`Posting` handed to :func:`post_batch` (or :func:`post` for one): it locks the
accounts it touches in primary-key order (``SELECT … FOR UPDATE``), skips postings whose idempotency key is already
booked, writes the transaction and its entries, and updates the cached balances — and, for a subsidised charge,
the programme's ``spent`` and the user's monthly ``SubsidyUsage`` — all in one database transaction.

Lock order, everywhere: usage sessions, then accounts (by pk), then subsidy programmes (by pk). A fixed order
means two postings can wait for each other but never deadlock.
"""

import uuid
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal

from django.db import IntegrityError, connection, transaction
from django.db.models import F, Q, Sum
from django.utils import timezone
from django.utils.translation import gettext as _

from core.errors import PaymentRequired

from . import spend
from .bulk import bulk_insert, bulk_set, instances, loaded
from .choices import (
    OVERDRAFT_KINDS,
    TRIAL_CREDIT_KINDS,
    TRIAL_DEBIT_KINDS,
    USER_ACCOUNT_KINDS,
    VOUCHER_CREDIT_KINDS,
    VOUCHER_DEBIT_KINDS,
    WALLET_KINDS,
    AccountKind,
    TransactionKind,
)
from .display import format_cny
from .models import Account, LedgerEntry, LedgerTransaction, SubsidyProgramme, SubsidyUsage, UsageSession, Voucher
from .money import CENT, ZERO, summed
from .rules import posting_minutes


class LedgerError(Exception):
    """A posting that breaks the ledger's rules: a programming error, never a user's mistake."""


class InsufficientFunds(PaymentRequired):
    """The wallet cannot pay for this (the trial credit only pays for compute)."""


@dataclass(frozen=True)
class SubsidyBooking:
    """The subsidised part of a charge, added to the programme's ``spent`` and the user's month."""

    programme_id: int
    user_id: int
    month: date
    amount: Decimal


@dataclass(frozen=True)
class Posting:
    """A transaction to post: ``entries`` are (account id, amount added to it) and must sum to zero."""

    kind: str
    idempotency_key: str
    entries: tuple[tuple[int, Decimal], ...]
    user_id: int | None = None
    reason: str = ""
    reference: str = ""
    provider_reference: str = ""
    usage_session_id: int | None = None
    resource_id: uuid.UUID | None = None
    topup_id: int | None = None
    minutes: int = 0
    subsidy: SubsidyBooking | None = None
    created_by_id: int | None = None
    at: datetime | None = None
    member_id: int | None = None  # a team's spend: the member it was for


# --- Accounts -----------------------------------------------------------------------------------------------------


def system_account(kind: str) -> Account:
    """The operator's account of ``kind`` (revenue, payment clearing, …), created on first use."""
    account = Account.objects.filter(kind=kind, user__isnull=True, programme__isnull=True).first()
    if account is not None:
        return account
    try:
        with transaction.atomic():
            return Account.objects.create(kind=kind)
    except IntegrityError:  # created by a concurrent first use
        return Account.objects.get(kind=kind, user__isnull=True, programme__isnull=True)


def user_accounts(user_ids: Iterable[int]) -> dict[int, dict[str, Account]]:
    """Each user's cash and trial accounts, creating the missing ones in bulk: {user id: {kind: account}}."""
    user_ids = set(user_ids)
    found = _user_accounts(user_ids)
    missing = [
        Account(kind=kind, user_id=uid) for uid in user_ids for kind in USER_ACCOUNT_KINDS if kind not in found[uid]
    ]
    if missing:
        Account.objects.bulk_create(missing, ignore_conflicts=True)
        found = _user_accounts(user_ids)
    return found


def _user_accounts(user_ids) -> dict[int, dict[str, Account]]:
    found: dict[int, dict[str, Account]] = defaultdict(dict)
    for account in Account.objects.filter(user_id__in=user_ids, kind__in=USER_ACCOUNT_KINDS):
        found[account.user_id][account.kind] = account
    return found


def programme_accounts(programme_ids: Iterable[int]) -> dict[int, Account]:
    programme_ids = set(programme_ids)
    if not programme_ids:
        return {}
    found = {a.programme_id: a for a in Account.objects.filter(programme_id__in=programme_ids)}
    missing = [Account(kind=AccountKind.SUBSIDY, programme_id=pid) for pid in programme_ids - found.keys()]
    if missing:
        Account.objects.bulk_create(missing, ignore_conflicts=True)
        found = {a.programme_id: a for a in Account.objects.filter(programme_id__in=programme_ids)}
    return found


def lock_accounts(account_ids: Iterable[int]) -> dict[int, Account]:
    """Lock accounts in primary-key order and return them with their current balances."""
    ids = sorted(set(account_ids))
    return {a.pk: a for a in Account.objects.select_for_update().filter(pk__in=ids).order_by("pk")}


def lock_user_accounts(user_ids: Iterable[int], extra_ids: Iterable[int] = ()) -> dict[int, Account]:
    """Lock the users' cash and trial accounts and ``extra_ids`` in one statement, in primary-key order.

    The users' accounts must exist (:func:`user_accounts` creates them); missing ones are created first.
    """
    user_ids, extra_ids = set(user_ids), set(extra_ids)
    query = Q(user_id__among=user_ids, kind__in=USER_ACCOUNT_KINDS) | Q(pk__among=extra_ids)
    locking = Account.objects.select_for_update().filter(query).order_by("pk")
    locked = {a.pk: a for a in instances(locking)}
    if sum(1 for a in locked.values() if a.user_id in user_ids and a.kind in USER_ACCOUNT_KINDS) < 2 * len(user_ids):
        user_accounts(user_ids)
        locked = {a.pk: a for a in instances(locking)}
    return locked


def lock_programmes(programme_ids: Iterable[int]) -> dict[int, SubsidyProgramme]:
    """Lock subsidy programmes (after the accounts) so that their budget and caps are read and spent atomically."""
    ids = sorted(set(programme_ids))
    if not ids:
        return {}
    return {p.pk: p for p in SubsidyProgramme.objects.select_for_update().filter(pk__in=ids).order_by("pk")}


def subsidy_used(pairs: Iterable[tuple[int, int]], month: date) -> dict[tuple[int, int], Decimal]:
    """What each (programme, user) pair has received in ``month``; read under the programmes' locks."""
    pairs = set(pairs)
    if not pairs:
        return {}
    rows = SubsidyUsage.objects.filter(
        month=month, programme_id__in={p for p, _u in pairs}, user_id__among={u for _p, u in pairs}
    ).values_list("programme_id", "user_id", "amount")
    return {(p, u): amount for p, u, amount in rows}


def available_subsidy(programme: SubsidyProgramme, used_this_month: Decimal) -> Decimal | None:
    """How much more a programme may pay for one user now (None: unlimited)."""
    limits = []
    if programme.budget is not None:
        limits.append(max(programme.budget - programme.spent, ZERO))
    if programme.monthly_cap_per_user is not None:
        limits.append(max(programme.monthly_cap_per_user - used_this_month, ZERO))
    return min(limits) if limits else None


# --- Posting ------------------------------------------------------------------------------------------------------


def post(posting: Posting, *, locked: dict[int, Account] | None = None, programmes=None) -> LedgerTransaction:
    """Post one transaction (see :func:`post_batch`). Returns the existing one if the key was already posted."""
    return post_batch([posting], locked=locked, programmes=programmes)[0]


def post_batch(
    postings: Sequence[Posting],
    *,
    locked: dict[int, Account] | None = None,
    programmes: dict[int, SubsidyProgramme] | None = None,
) -> list[LedgerTransaction]:
    """THE posting function. Atomically books every posting not booked before (by idempotency key).

    ``locked`` are accounts the caller already locked in this transaction (with balances it has read); any other
    account is locked here. ``programmes`` likewise for subsidy programmes. Raises :class:`InsufficientFunds` when
    a wallet cannot pay and :class:`LedgerError` for a malformed posting; then nothing is written.
    """
    keys = [p.idempotency_key for p in postings]
    if len(set(keys)) != len(keys):
        raise LedgerError("duplicate idempotency keys in one batch")
    for p in postings:
        _validate(p)
    with transaction.atomic():
        accounts = dict(locked or {})
        wanted = {aid for p in postings for aid, _a in p.entries}
        if wanted - accounts.keys():
            accounts |= lock_accounts(wanted - accounts.keys())
        if wanted - accounts.keys():
            raise LedgerError(f"unknown accounts {sorted(wanted - accounts.keys())}")
        # Checked after the locks: a concurrent posting of the same key has committed by now, or will wait for us.
        now = timezone.now()
        existing, todo, created = _claim(postings, accounts, now)
        if not todo:
            return [existing[k] for k in keys]
        booked = _book_subsidies([p.subsidy for p in todo if p.subsidy], programmes or {})
        changed: dict[int, Account] = {}
        for p in todo:
            at = p.at or now
            for account_id, amount in p.entries:
                account = accounts[account_id]
                _apply(account, amount, p, at)
                changed[account_id] = account
        if created is None:
            created = LedgerTransaction.objects.bulk_create(
                [LedgerTransaction(**_transaction_values(p, now, accounts)) for p in todo]
            )
        bulk_insert(
            LedgerEntry,
            ["transaction_id", "account_id", "amount", "created_at"],
            [
                (tx.pk, aid, amount, tx.created_at)
                for tx, p in zip(created, todo, strict=True)
                for aid, amount in p.entries
            ],
        )
        bulk_set(Account, list(changed.values()), ["balance"])
        spend.record(created)
        booked()
        if posting_minutes() > 1:
            # Wallets lowered by anything but metering (a refund clawed back, a withdrawal, a staff debit, a plan
            # paid up front, storage's daily charge): on the longer cadence their sessions would otherwise be
            # looked at only at their next posting, minutes after the wallet ran low.
            look_again(
                {
                    tx.user_id
                    for tx, p in zip(created, todo, strict=True)
                    if tx.user_amount < 0 and tx.user_id and p.usage_session_id is None
                }
            )
    by_key = existing | {tx.idempotency_key: tx for tx in created}
    return [by_key[k] for k in keys]


def look_again(user_ids: Iterable[int], member_id: int | None = None) -> None:
    """The payers' open sessions (one member's only, when given) are looked at by the next tick, which posts a
    payer at risk every minute: after their wallet was lowered, or what stops them changed (a spending cap, a
    member's budget). After the commit: the tick locks sessions before wallets, never after."""
    user_ids = set(user_ids)
    if not user_ids:
        return
    sessions = UsageSession.objects.open().filter(user_id__in=user_ids, charge_due_at__isnull=False)
    if member_id is not None:
        sessions = sessions.filter(member_id=member_id)
    transaction.on_commit(lambda: sessions.update(charge_due_at=None))


def _validate(p: Posting) -> None:
    if not p.entries:
        raise LedgerError("a posting needs entries")
    total = ZERO
    for _aid, amount in p.entries:
        if amount.quantize(CENT) != amount:
            raise LedgerError(f"amount {amount} is not in fen")
        total += amount
    if total != ZERO:
        raise LedgerError(f"entries of {p.idempotency_key} sum to {total}, not zero")
    if p.subsidy is not None and p.subsidy.amount < 0 and not is_usage_credit(p):
        raise LedgerError("a subsidy booking cannot be negative")


def is_usage_credit(p: Posting) -> bool:
    """Whether ``p`` gives back minutes charged past a run's end (``billing.metering``): negative minutes."""
    return p.kind == TransactionKind.USAGE and p.minutes < 0


def _apply(account: Account, amount: Decimal, p: Posting, at: datetime) -> None:
    """Add ``amount`` to the locked ``account`` if the ledger's rules allow it."""
    new = account.balance + amount
    if account.kind == AccountKind.USER_TRIAL:
        if amount < 0 and p.kind not in TRIAL_DEBIT_KINDS:
            raise InsufficientFunds(_("The trial credit can only pay for compute."), code="trial_compute_only")
        if amount > 0 and p.kind not in TRIAL_CREDIT_KINDS:
            raise LedgerError(f"{p.kind} cannot credit a trial bucket")
        if (
            amount < 0
            and p.kind != TransactionKind.TRIAL_EXPIRY
            and (account.expires_at is None or account.expires_at <= at)
        ):
            raise InsufficientFunds(_("The trial credit has expired."), code="trial_expired")
        if new < 0:
            raise InsufficientFunds(_("Not enough trial credit."), code="insufficient_trial")
    elif account.kind == AccountKind.USER_VOUCHER:
        if amount < 0 and p.kind not in VOUCHER_DEBIT_KINDS:
            raise LedgerError(f"{p.kind} cannot spend a voucher")
        if amount > 0 and p.kind not in VOUCHER_CREDIT_KINDS:
            raise LedgerError(f"{p.kind} cannot credit a voucher")
        if amount < 0 and p.kind != TransactionKind.VOUCHER_EXPIRY and account.expires_at <= at:
            raise InsufficientFunds(_("The voucher has expired."), code="voucher_expired")
        if new < 0:
            raise LedgerError(f"voucher account {account.pk} would go below zero")
    elif account.kind == AccountKind.USER_CASH and amount < 0 and new < 0 and p.kind not in OVERDRAFT_KINDS:
        raise InsufficientFunds(
            _("Not enough balance: %(amount)s is needed and your cash balance is %(balance)s.")
            % {"amount": format_cny(-amount), "balance": format_cny(account.balance)},
        )
    account.balance = new


def _transaction_values(p: Posting, now: datetime, accounts: dict[int, Account]) -> dict:
    """Every field of the posting's transaction but its primary key; its user amount is what its entries add to
    the user's wallet accounts."""
    return {
        "public_id": uuid.uuid4(),
        "kind": p.kind,
        "idempotency_key": p.idempotency_key,
        "user_id": p.user_id,
        "user_amount": sum((amount for aid, amount in p.entries if accounts[aid].kind in WALLET_KINDS), ZERO),
        "subsidy_amount": p.subsidy.amount if p.subsidy else ZERO,
        "minutes": p.minutes,
        "usage_session_id": p.usage_session_id,
        "resource_id": p.resource_id,
        "topup_id": p.topup_id,
        "reason": p.reason[:255],
        "reference": p.reference[:255],
        "provider_reference": p.provider_reference[:255],
        "created_by_id": p.created_by_id,
        "member_id": p.member_id,
        "created_at": p.at or now,
    }


_TRANSACTION_FIELDS = [f.attname for f in LedgerTransaction._meta.concrete_fields if not f.primary_key]


def _claim(postings, accounts, now):
    """(the transactions already booked by key, the postings to book, their new transactions or None).

    On PostgreSQL the transactions are inserted here, every key already booked skipped by the insert itself
    (``ON CONFLICT DO NOTHING``, which waits for a concurrent insert of the same key to commit or roll back):
    looking up a thousand keys first was planned as a scan of the whole ledger. A posting refused after this
    (not enough funds) rolls the insert back with the rest. Elsewhere the keys are looked up, and the new
    transactions are inserted by the caller once every posting has passed."""
    keys = [p.idempotency_key for p in postings]
    if connection.vendor != "postgresql":
        existing = {t.idempotency_key: t for t in LedgerTransaction.objects.filter(idempotency_key__in=keys)}
        return existing, [p for p in postings if p.idempotency_key not in existing], None
    rows = [_transaction_values(p, now, accounts) for p in postings]
    pks = bulk_insert(
        LedgerTransaction,
        _TRANSACTION_FIELDS,
        [[row[name] for name in _TRANSACTION_FIELDS] for row in rows],
        returning=("idempotency_key", "id"),
        skipping="idempotency_key",
    )
    created = [
        loaded(LedgerTransaction, {"id": pks[row["idempotency_key"]], **row})
        for row in rows
        if row["idempotency_key"] in pks
    ]
    missing = [key for key in keys if key not in pks]
    existing = {t.idempotency_key: t for t in LedgerTransaction.objects.filter(idempotency_key__among=missing)}
    if len(existing) != len(missing):  # skipped by the insert, yet not there: refuse before anything commits
        raise LedgerError(f"transactions {sorted(set(missing) - existing.keys())} were neither inserted nor found")
    return existing, [p for p in postings if p.idempotency_key in pks], created


def _book_subsidies(bookings: list[SubsidyBooking], programmes: dict[int, SubsidyProgramme]):
    """Check subsidy bookings against the locked programmes now; return the function that writes them."""
    if not bookings:
        return lambda: None
    missing = {b.programme_id for b in bookings} - programmes.keys()
    programmes = programmes | lock_programmes(missing)
    months = {b.month for b in bookings}
    used: dict[tuple[int, int, date], Decimal] = {}
    for month in months:
        pairs = [(b.programme_id, b.user_id) for b in bookings if b.month == month]
        used |= {(p, u, month): amount for (p, u), amount in subsidy_used(pairs, month).items()}
    existing = set(used)
    spent: dict[int, Decimal] = defaultdict(Decimal)
    for b in bookings:
        key = (b.programme_id, b.user_id, b.month)
        programme = programmes[b.programme_id]
        limit = available_subsidy(programme, used.get(key, ZERO))
        if limit is not None and b.amount > limit:
            raise LedgerError(f"subsidy {b.amount} exceeds what {programme.slug} has left ({limit})")
        used[key] = used.get(key, ZERO) + b.amount
        programme.spent += b.amount
        spent[b.programme_id] += b.amount

    def write():
        SubsidyProgramme.objects.bulk_update([programmes[pid] for pid in spent], ["spent"])
        new_rows = [
            SubsidyUsage(programme_id=p, user_id=u, month=m, amount=a)
            for (p, u, m), a in used.items()
            if (p, u, m) not in existing
        ]
        SubsidyUsage.objects.bulk_create(new_rows)
        rows = SubsidyUsage.objects.filter(
            month__in=months, programme_id__in=spent.keys(), user_id__among={u for _p, u, _m in existing}
        )
        changed = []
        for row in rows:
            key = (row.programme_id, row.user_id, row.month)
            if key in existing and row.amount != used[key]:
                row.amount = used[key]
                changed.append(row)
        bulk_set(SubsidyUsage, changed, ["amount"])

    return write


# --- The check ------------------------------------------------------------------------------------------------------


def check() -> list[str]:
    """Every problem found: caches that differ from the sum of their entries, unbalanced transactions, …"""
    problems = []
    sums = dict(
        LedgerEntry.objects.values_list("account_id").annotate(total=Sum("amount")).values_list("account_id", "total")
    )
    for account in Account.objects.select_related("user", "programme"):
        total = summed(sums.get(account.pk))
        if account.balance != total:
            problems.append(f"account {account.pk} ({account}): cached {account.balance} ≠ entries {total}")
        if account.kind in (AccountKind.USER_TRIAL, AccountKind.USER_VOUCHER) and account.balance < 0:
            problems.append(f"account {account.pk} ({account}): a {account.kind} bucket is negative")
    unbalanced = LedgerEntry.objects.values("transaction_id").annotate(total=Sum("amount")).exclude(total=0)
    for row in unbalanced:
        if summed(row["total"]) == 0:
            continue
        problems.append(f"transaction {row['transaction_id']}: entries sum to {row['total']}")
    user_sums = dict(
        LedgerEntry.objects.filter(account__kind__in=WALLET_KINDS)
        .values_list("transaction_id")
        .annotate(total=Sum("amount"))
        .values_list("transaction_id", "total")
    )
    for pk, user_amount in LedgerTransaction.objects.values_list("pk", "user_amount"):
        if summed(user_sums.get(pk)) != user_amount:
            problems.append(f"transaction {pk}: user amount {user_amount} ≠ wallet entries {user_sums.get(pk)}")
    problems += _check_subsidies()
    problems += _check_vouchers()
    problems += spend.check()
    return problems


def _check_vouchers() -> list[str]:
    """The voucher liabilities: each voucher's account was given its amount once, is spent only down to zero and
    is empty once its expiry is booked; what was issued is what the vouchers were given."""
    problems = []
    granted = dict(
        LedgerEntry.objects.filter(
            account__kind=AccountKind.USER_VOUCHER, amount__gt=0, transaction__kind=TransactionKind.VOUCHER_GRANT
        )
        .values_list("account_id")
        .annotate(total=Sum("amount"))
        .values_list("account_id", "total")
    )
    accounts = set(Account.objects.filter(kind=AccountKind.USER_VOUCHER).values_list("pk", flat=True))
    issued = ZERO
    for voucher in Voucher.objects.select_related("account"):
        accounts.discard(voucher.account_id)
        issued += voucher.amount
        given = summed(granted.get(voucher.account_id))
        if given != voucher.amount:
            problems.append(f"voucher {voucher.public_id}: given {given} ≠ its amount {voucher.amount}")
        if voucher.account.balance > voucher.amount:
            problems.append(f"voucher {voucher.public_id}: holds {voucher.account.balance}, more than {voucher.amount}")
        if voucher.expired_at is not None and voucher.account.balance != 0:
            problems.append(f"voucher {voucher.public_id}: expired with {voucher.account.balance} left on it")
        if voucher.account.user_id != voucher.user_id or voucher.account.kind != AccountKind.USER_VOUCHER:
            problems.append(f"voucher {voucher.public_id}: its account is not a voucher account of its wallet")
    problems += [f"account {pk}: a voucher account with no voucher" for pk in sorted(accounts)]
    voucher_entries = LedgerEntry.objects.filter(account__kind=AccountKind.USER_VOUCHER)
    misused = (
        voucher_entries.filter(amount__lt=0).exclude(transaction__kind__in=VOUCHER_DEBIT_KINDS)
        | voucher_entries.filter(amount__gt=0).exclude(transaction__kind__in=VOUCHER_CREDIT_KINDS)
        | voucher_entries.filter(amount__lt=0, created_at__gte=F("account__expires_at")).exclude(
            transaction__kind=TransactionKind.VOUCHER_EXPIRY
        )
    )
    for tx_id, kind in misused.values_list("transaction_id", "transaction__kind").distinct():
        problems.append(f"transaction {tx_id}: a {kind} moved money on a voucher it may not (kind or date)")
    strays = LedgerEntry.objects.filter(account__kind=AccountKind.VOUCHER_EXPIRED).exclude(
        transaction__kind=TransactionKind.VOUCHER_EXPIRY
    )
    problems += [
        f"transaction {t}: only a voucher's expiry may move money to expired vouchers"
        for t in strays.values_list("transaction_id", flat=True).distinct()
    ]
    funding = Account.objects.filter(kind=AccountKind.VOUCHER_FUNDING, user__isnull=True).first()
    if -(funding.balance if funding else ZERO) != issued:
        problems.append(f"vouchers issued {issued} ≠ the issuing account's {funding.balance if funding else ZERO}")
    return problems


def _check_subsidies() -> list[str]:
    problems = []
    accounts = {a.programme_id: a.balance for a in Account.objects.filter(kind=AccountKind.SUBSIDY)}
    usage = dict(
        SubsidyUsage.objects.values_list("programme_id")
        .annotate(total=Sum("amount"))
        .values_list("programme_id", "total")
    )
    for programme in SubsidyProgramme.objects.all():
        account = -(accounts.get(programme.pk) or ZERO)
        used = summed(usage.get(programme.pk))
        if programme.spent != account:
            problems.append(f"programme {programme.slug}: spent {programme.spent} ≠ its ledger account {account}")
        if used != programme.spent:
            problems.append(f"programme {programme.slug}: spent {programme.spent} ≠ monthly usage {used}")
    return problems
