"""Monthly statements per resource and the transaction list with its CSV export."""

from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import NamedTuple

from django.contrib.auth import get_user_model
from django.core.paginator import Page, Paginator
from django.utils import timezone
from django.utils.translation import gettext as _

from core import csvsafe
from teams.accounts import is_account

from . import catalog_names, spend
from .models import LedgerTransaction, UsageSession
from .money import ZERO, summed
from .rules import month_of


class StatementLine(NamedTuple):  # a tuple: a page builds fifty of them on every visit
    resource_id: object
    kind: str
    label: str
    chip: str
    cards: int
    chip_name: str
    zone_name: str
    plan_name: str
    minutes: int
    charged: Decimal
    subsidy: Decimal
    member: str = ""  # on a team's statement: the member whose use it was (their address)


NO_MONEY = Decimal("0.00")  # a line's zero sum, written as every amount is: to the fen


@dataclass(frozen=True)
class MemberSpend:
    member: str  # the member's address; empty for charges of the team's own (top-up fees, adjustments…)
    minutes: int
    charged: Decimal


@dataclass(frozen=True)
class Statement:
    """A month's lines (all of them, or one page's) and the month's totals over every line; on a team's statement
    also the month's totals per member."""

    month: date
    lines: list[StatementLine]
    minutes: int
    charged: Decimal
    subsidy: Decimal
    members: list[MemberSpend] = field(default_factory=list)


def parse_month(text: str | None) -> date:
    """'2026-03' → 2026-03-01; empty → this month."""
    if not text:
        return month_of(timezone.now())
    year, month = (int(part) for part in text.split("-"))
    return date(year, month, 1)


def grouped_rows(user, month: date) -> list[dict]:
    """One row per resource (and, on a team's wallet, per member who used it) charged in ``month``, most expensive
    first, from the running sums (``billing.spend``): rows in proportion to resources, not to minutes charged."""
    rows = spend.month_lines(user, month)
    members = {row["member_id"] for row in rows if row["member_id"]}
    emails = dict(get_user_model().objects.filter(pk__in=members).values_list("pk", "email")) if members else {}
    if len(emails) == len(members):
        for row in rows:
            row["member__email"] = emails.get(row["member_id"])
        return rows
    # A member whose account was deleted: the ledger no longer names them, and their lines join the unnamed ones.
    merged: dict[tuple, dict] = {}
    for row in rows:
        member = row["member_id"] if row["member_id"] in emails else None
        key = (row["resource_id"], row["kind"], member)
        if key not in merged:
            merged[key] = row | {"member_id": member, "member__email": emails.get(member)}
        else:
            for name in ("minutes", "charged", "subsidy"):
                merged[key][name] += row[name]
    order = lambda r: (r["charged"], str(r["resource_id"] or ""), r["kind"], r["member_id"] or 0)  # noqa: E731
    return sorted(merged.values(), key=order)


def statement_page(user, month: date, number, per_page: int) -> tuple[Page, Statement]:
    """Page ``number`` of ``month``'s statement and the month's totals. A person's page reads only its own lines
    and sums the month in the database, so a month of a thousand resources costs what a page of them does; a team's
    statement reads the month's lines once (they are grouped per member, a deleted member's joining the team's)."""
    if is_account(user):
        grouped = grouped_rows(user, month)
        page = Paginator(grouped, per_page).get_page(number)
        return page, month_statement(user, month, rows=page.object_list, grouped=grouped)
    totals = spend.month_line_totals(user, month)  # counts the lines too: the paginator does not count them again
    paginator = Paginator(spend.month_line_rows(user, month), per_page)
    paginator.count = totals["lines"]  # Paginator.count is a cached property: set, the paginator does not count
    page = paginator.get_page(number)
    rows = [spend.line_row(line) for line in page.object_list]
    return page, month_statement(user, month, rows=rows, totals=totals)


# What a line shows of the session that names its resource.
NAMING_FIELDS = ("resource_id", "kind", "label", "chip_slug", "cards", "zone_slug", "plan_slug")


def _naming(user_id, ids):
    """The sessions that name resources ``ids``, each resource's oldest first (its latest names it; a resource has
    one session per start): the order of the index of the user's sessions per resource, so not every session the
    user ever had is read."""
    queryset = UsageSession.objects.filter(user_id=user_id, resource_id__in=ids).order_by("resource_id", "started_at")
    return queryset.values_list(*NAMING_FIELDS)


def month_statement(user, month: date, rows=None, *, grouped: list | None = None, totals=None) -> Statement:
    """What each resource cost in ``month``, with the subsidy it received, and the month's totals.

    ``rows`` (a page of ``grouped_rows``) limits the lines to those; the totals always cover the month: ``totals``
    when given (a person's, summed by the database), else summed from ``grouped`` (all of the month's
    :func:`grouped_rows`, already read to page through, or read here). A few queries whatever the number of rows.
    """
    if totals is None or is_account(user):
        if grouped is None:
            grouped = grouped_rows(user, month)
        # The month's groups are its spend, partitioned: their sums are the month's.
        totals = {
            "minutes": sum(row["minutes"] or 0 for row in grouped),
            "charged": sum((summed(row["charged"]) for row in grouped), ZERO),
            "subsidy": sum((summed(row["subsidy"]) for row in grouped), ZERO),
        }
    rows = list(grouped if rows is None else rows)
    per_member = []
    if is_account(user):
        by_member: dict = {}
        for row in grouped:
            key = (row["member_id"], row["member__email"])
            minutes, charged = by_member.get(key, (0, ZERO))
            by_member[key] = (minutes + (row["minutes"] or 0), charged + summed(row["charged"]))
        per_member = [
            {"member_id": member_id, "member__email": email, "minutes": minutes, "charged": charged}
            for (member_id, email), (minutes, charged) in sorted(
                by_member.items(), key=lambda item: (item[1][1], item[0][0] or 0)
            )
        ]
    ids = {row["resource_id"] for row in rows if row["resource_id"]}
    sessions = {}
    named = _naming(user.pk, ids) if ids else []
    for values in named:  # values, not models: a page names fifty resources or more
        session = dict(zip(NAMING_FIELDS, values, strict=True))
        sessions[session["resource_id"]] = session  # the latest session names the resource
    chips, zones, plans = catalog_names.names(
        chips=[s["chip_slug"] for s in sessions.values()],
        zones=[s["zone_slug"] for s in sessions.values()],
        plans=[s["plan_slug"] for s in sessions.values()],
    )
    lines, kinds = [], {}  # each kind's name translated once, not once per line
    for row in rows:
        s = sessions.get(row["resource_id"])
        model, kind = (UsageSession, s["kind"]) if s else (LedgerTransaction, row["kind"])
        if (model, kind) not in kinds:
            kinds[model, kind] = str(model(kind=kind).get_kind_display())
        lines.append(
            StatementLine(
                resource_id=row["resource_id"],
                kind=kinds[model, kind],
                label=(s["label"] if s else "") or str(row["resource_id"] or ""),
                chip=s["chip_slug"] if s else "",
                cards=s["cards"] if s else 0,
                chip_name=chips.get(s["chip_slug"], s["chip_slug"]) if s else "",
                zone_name=zones.get(s["zone_slug"], s["zone_slug"]) if s else "",
                plan_name=plans.get(s["plan_slug"], s["plan_slug"]) if s else "",
                minutes=row["minutes"] or 0,
                charged=-(row["charged"] or NO_MONEY),  # exact fen already (spend.line_row)
                subsidy=row["subsidy"] or NO_MONEY,
                member=row.get("member__email") or "",
            )
        )
    return Statement(
        month=month,
        lines=lines,
        minutes=totals["minutes"] or 0,
        charged=-summed(totals["charged"]),
        subsidy=summed(totals["subsidy"]),
        members=[
            MemberSpend(row["member__email"] or "", row["minutes"] or 0, -summed(row["charged"])) for row in per_member
        ],
    )


def statement_csv(statement: Statement, out) -> None:
    # The chip column keeps the slug for scripts; the names people read follow at the end of each row.
    writer = csvsafe.writer(out)
    # A team's statement adds the member each line was for, last.
    team = bool(statement.members)
    writer.writerow(
        [
            _("Resource"),
            _("Kind"),
            _("Name"),
            _("Chip"),
            _("Cards"),
            _("Billed minutes"),
            _("Charged (CNY)"),
            _("Subsidy (CNY)"),
            _("Chip name"),
            _("Zone"),
            _("Plan"),
            *([_("Member")] if team else []),
        ]
    )
    for line in statement.lines:
        writer.writerow(
            [
                line.resource_id or "",
                line.kind,
                line.label,
                line.chip,
                line.cards,
                line.minutes,
                line.charged,
                line.subsidy,
                line.chip_name,
                line.zone_name,
                line.plan_name,
                *([line.member] if team else []),
            ]
        )
    writer.writerow(["", _("Total"), "", "", "", statement.minutes, statement.charged, statement.subsidy])


TRANSACTION_ORDER = ("-created_at", "-pk")  # newest first; the key makes the order total (read from either end)


def filtered_transactions(user, *, kind: str = "", since: date | None = None, until: date | None = None):
    qs = LedgerTransaction.objects.for_user(user)
    if kind:
        qs = qs.filter(kind=kind)
    if since:
        qs = qs.filter(created_at__gte=timezone.make_aware(datetime.combine(since, datetime.min.time())))
    if until:
        end = timezone.make_aware(datetime.combine(until + timedelta(days=1), datetime.min.time()))
        qs = qs.filter(created_at__lt=end)
    return qs.order_by(*TRANSACTION_ORDER)


def transactions_csv(transactions, out) -> None:
    writer = csvsafe.writer(out)
    writer.writerow([_("Time"), _("Kind"), _("Description"), _("Amount (CNY)"), _("Subsidy (CNY)"), _("ID")])
    for tx in transactions.iterator(chunk_size=2000):
        writer.writerow(
            [
                timezone.localtime(tx.created_at).isoformat(),
                tx.get_kind_display(),
                tx.description,
                tx.user_amount,
                tx.subsidy_amount,
                tx.public_id,
            ]
        )
