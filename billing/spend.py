"""A wallet's spend (usage, prepaid plans, storage) summed as it is booked, so that pages never sum the ledger.

Metering books one ledger transaction per running resource per minute: a month of one busy user is hundreds of
thousands of rows. :func:`record` — called by ``ledger.post_batch`` in the posting's own transaction — adds each
spend posting to two running sums: per quarter-hour and member (:class:`SpendQuarter`: the 30-day chart, the month
so far) and per local month, resource, kind and member (:class:`SpendLine`: the statement). They are exact (whole
fen, added in SQL) and always equal the ledger; ``ledger.check`` compares them, and :func:`rebuild` recomputes
them from the ledger (after a change of ``TIME_ZONE``, which moves month boundaries).
"""

import uuid
from collections import defaultdict
from collections.abc import Iterable
from datetime import UTC, date, datetime
from decimal import Decimal

from django.db import transaction
from django.db.models import Count, Sum

from .bulk import bulk_add
from .choices import SPEND_KINDS, AccountKind
from .models import Account, LedgerTransaction, SpendLine, SpendQuarter
from .money import CENT, ZERO, summed
from .rules import month_bounds, month_of

NO_MEMBER = 0
NO_RESOURCE = uuid.UUID(int=0)
QUARTER_SECONDS = 900


def quarter_start(moment: datetime) -> datetime:
    """The quarter-hour ``moment`` falls in (quarters are UTC-aligned; every UTC offset is a multiple of 15 min)."""
    seconds = int(moment.timestamp())
    return datetime.fromtimestamp(seconds - seconds % QUARTER_SECONDS, UTC)


def to_fen(amount: Decimal) -> int:
    return int((amount / CENT).to_integral_value())


def from_fen(fen: int | None) -> Decimal:
    return ZERO if not fen else (Decimal(fen) * CENT)


def record(transactions: Iterable[LedgerTransaction]) -> None:
    """Add the spend among ``transactions`` (just booked, in the caller's transaction) to the running sums."""
    quarters: dict[tuple, int] = defaultdict(int)
    lines: dict[tuple, list[int]] = defaultdict(lambda: [0, 0, 0])
    placed: dict[datetime, tuple[datetime, date]] = {}  # a batch's transactions mostly share one moment
    for tx in transactions:
        if tx.kind not in SPEND_KINDS or tx.user_id is None:
            continue
        member = tx.member_id or NO_MEMBER
        if (where := placed.get(tx.created_at)) is None:
            where = placed[tx.created_at] = (quarter_start(tx.created_at), month_of(tx.created_at))
        quarters[(tx.user_id, member, where[0])] += to_fen(tx.user_amount)
        line = lines[(tx.user_id, where[1], tx.resource_id or NO_RESOURCE, tx.kind, member)]
        line[0] += tx.minutes or 0
        line[1] += to_fen(tx.user_amount)
        line[2] += to_fen(tx.subsidy_amount)
    if not quarters:
        return
    # INSERT … ON CONFLICT DO UPDATE adds to a row another posting made (PostgreSQL and SQLite alike); the keys are
    # sorted so that two batches touching the same rows take their locks in one order.
    bulk_add(
        SpendQuarter,
        ["user", "start", "member_id"],
        ["amount_fen"],
        [(user, start, member, fen) for (user, member, start), fen in sorted(quarters.items())],
    )
    bulk_add(
        SpendLine,
        ["user", "month", "resource_id", "kind", "member_id"],
        ["minutes", "amount_fen", "subsidy_fen"],
        [(*key, *sums) for key, sums in sorted(lines.items(), key=_line_order)],
    )


def _line_order(item):
    user, month, resource, kind, member = item[0]
    return (user, month, str(resource), kind, member)


# Reading ----------------------------------------------------------------------------------------------------------


def month_spent(user, month: date) -> Decimal:
    """What ``user``'s wallet spent in the local month that starts on ``month`` (positive)."""
    start, end = month_bounds(month)
    total = SpendQuarter.objects.filter(user=user, start__gte=start, start__lt=end).aggregate(t=Sum("amount_fen"))
    return -from_fen(total["t"])


def month_totals(month: date, users, members=None) -> dict:
    """What each of ``users``' wallets spent in the local month that starts on ``month`` (positive), keyed by user;
    with ``members``, only their spend on those wallets, keyed by (user, member). One grouped query."""
    start, end = month_bounds(month)
    rows = SpendQuarter.objects.filter(user_id__in=list(users), start__gte=start, start__lt=end)
    if members is None:
        keys = ("user_id",)
    else:
        rows, keys = rows.filter(member_id__in=list(members)), ("user_id", "member_id")
    totals = rows.values_list(*keys).annotate(t=Sum("amount_fen")).values_list(*keys, "t").order_by()
    return {(row[0] if members is None else row[:2]): -from_fen(row[-1]) for row in totals}


def per_quarter(user, since: datetime) -> list[tuple[datetime, Decimal]]:
    """(quarter start, spend) of every quarter from ``since`` with spend, all members together."""
    quarters = SpendQuarter.objects.filter(user_id=getattr(user, "pk", user), start__gte=since)
    summed = quarters.values("start").annotate(t=Sum("amount_fen")).order_by("start")
    return [(row["start"], -from_fen(row["t"])) for row in summed]


LINE_FIELDS = ("resource_id", "kind", "member_id", "minutes", "amount_fen", "subsidy_fen")


def month_line_rows(user, month: date):
    """``month``'s lines of ``user``'s wallet as tuples of ``LINE_FIELDS``, most expensive first (a query: page it,
    then read each row with :func:`line_row`)."""
    lines = SpendLine.objects.filter(user=user, month=month)
    return lines.order_by("amount_fen", "resource_id", "kind", "member_id", "pk").values_list(*LINE_FIELDS)


def line_row(line: tuple) -> dict:
    """One line in the shape the statement reads: ``resource_id`` None for spend on no one resource, sums in CNY
    (negative for spend)."""
    resource, kind, member, minutes, fen, subsidy = line
    return {
        "resource_id": None if resource == NO_RESOURCE else resource,
        "kind": kind,
        "member_id": member or None,
        "minutes": minutes,
        "charged": from_fen(fen),
        "subsidy": from_fen(subsidy),
    }


def month_line_totals(user, month: date) -> dict:
    """The month's minutes, charge and subsidy over all its lines, summed in the database, and how many lines
    there are (``lines``)."""
    # The lines of one user grouped by the user: the sums come back as one row (none when the month has none).
    lines = SpendLine.objects.filter(user_id=getattr(user, "pk", user), month=month).order_by().values("user_id")
    totals = lines.annotate(
        minutes=Sum("minutes"), charged=Sum("amount_fen"), subsidy=Sum("subsidy_fen"), lines=Count("id")
    )
    sums = next(iter(totals), {})
    return {
        "minutes": sums.get("minutes") or 0,
        "charged": from_fen(sums.get("charged") or 0),
        "subsidy": from_fen(sums.get("subsidy") or 0),
        "lines": sums.get("lines") or 0,
    }


def month_lines(user, month: date) -> list[dict]:
    """Every one of the statement's rows for ``month`` (see :func:`line_row`), most expensive first."""
    return [line_row(line) for line in month_line_rows(user, month)]


# Keeping them true ------------------------------------------------------------------------------------------------


def check() -> list[str]:
    """Where the running sums differ from the ledger's spend (per wallet and quarter, and per wallet, month,
    resource and kind; members are left out, as a deleted member's transactions lose their name)."""
    problems = []
    ledger_quarters: dict[tuple, Decimal] = defaultdict(lambda: ZERO)
    ledger_lines: dict[tuple, list] = defaultdict(lambda: [0, ZERO, ZERO])
    spend = LedgerTransaction.objects.filter(kind__in=SPEND_KINDS, user__isnull=False)
    fields = ("user_id", "created_at", "resource_id", "kind", "minutes", "user_amount", "subsidy_amount")
    for user, at, resource, kind, minutes, amount, subsidy in spend.values_list(*fields).iterator(chunk_size=5000):
        ledger_quarters[(user, quarter_start(at))] += summed(amount)
        line = ledger_lines[(user, month_of(at), resource or NO_RESOURCE, kind)]
        line[0] += minutes or 0
        line[1] += summed(amount)
        line[2] += summed(subsidy)
    kept_quarters: dict[tuple, Decimal] = defaultdict(lambda: ZERO)
    for user, start, fen in SpendQuarter.objects.values_list("user_id", "start", "amount_fen").iterator():
        kept_quarters[(user, start)] += from_fen(fen)
    for key in sorted(set(ledger_quarters) | set(kept_quarters), key=str):
        if ledger_quarters.get(key, ZERO) != kept_quarters.get(key, ZERO):
            problems.append(
                f"spend of user {key[0]} in the quarter from {key[1]:%Y-%m-%d %H:%M}: summed "
                f"{kept_quarters.get(key, ZERO)} ≠ ledger {ledger_quarters.get(key, ZERO)}"
            )
    kept_lines: dict[tuple, list] = defaultdict(lambda: [0, ZERO, ZERO])
    line_fields = ("user_id", "month", "resource_id", "kind", "minutes", "amount_fen", "subsidy_fen")
    for user, month, resource, kind, minutes, fen, subsidy in SpendLine.objects.values_list(*line_fields).iterator():
        line = kept_lines[(user, month, resource, kind)]
        line[0] += minutes
        line[1] += from_fen(fen)
        line[2] += from_fen(subsidy)
    for key in sorted(set(ledger_lines) | set(kept_lines), key=str):
        if ledger_lines.get(key, [0, ZERO, ZERO]) != kept_lines.get(key, [0, ZERO, ZERO]):
            problems.append(
                f"statement line of user {key[0]}, {key[1]:%Y-%m}, {key[2]} ({key[3]}): summed "
                f"{kept_lines.get(key)} ≠ ledger {ledger_lines.get(key)}"
            )
    return problems


def rebuild() -> int:
    """Recompute every running sum from the ledger. Returns how many spend transactions were read.

    Every spend posting locks the revenue account (it is credited by each), so holding that lock here keeps postings
    out until the sums are rebuilt: none is counted twice or missed."""
    with transaction.atomic():
        list(Account.objects.select_for_update().filter(kind=AccountKind.REVENUE, user__isnull=True))
        SpendQuarter.objects.all().delete()
        SpendLine.objects.all().delete()
        read = 0
        batch = []
        spend = LedgerTransaction.objects.filter(kind__in=SPEND_KINDS, user__isnull=False).order_by("pk")
        for tx in spend.only(*RECORDED).iterator(chunk_size=5000):
            batch.append(tx)
            if len(batch) == 5000:
                record(batch)
                read, batch = read + len(batch), []
        record(batch)
        return read + len(batch)


RECORDED = ("kind", "user_id", "member_id", "created_at", "resource_id", "minutes", "user_amount", "subsidy_amount")
