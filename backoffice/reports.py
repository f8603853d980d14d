"""What the back office shows: capacity by zone and chip (now and over time), revenue, subsidy spend against the
budgets, and the subsidy reconciliation for claims. Each report reads a fixed number of queries whatever the
number of rows; money is summed exactly (``billing.money.summed``) and never passes through a float."""

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from decimal import Decimal

from django.db import transaction
from django.db.models import Case, Count, F, IntegerField, OuterRef, Subquery, Sum, When
from django.db.models.functions import TruncDate
from django.utils import timezone

from accounts.ops.models import CapacitySnapshot
from billing.catalog_names import chip_names, plan_names, zone_names
from billing.choices import SPEND_KINDS, AccountKind, TransactionKind, UsageKind
from billing.models import LedgerEntry, LedgerTransaction, SubsidyProgramme, SubsidyUsage, UsageSession
from billing.money import MINUTES_PER_HOUR, ZERO, summed, to_cents
from billing.rules import month_bounds, month_of
from catalog.models import Chip, Node, Zone
from core import csvsafe
from core.chart_time import slot_label
from instances.choices import Status
from instances.models import Instance

SNAPSHOT_MINUTES = 5
STORAGE_GROUP = "storage"  # the revenue breakdowns' row for storage charges (no chip, zone or plan)


# --- Capacity ---------------------------------------------------------------------------------------------------------


@dataclass
class CapacityRow:
    """Cards of one chip in one zone: in use, idle on drained nodes, free for new instances."""

    zone: Zone
    chip: Chip
    nodes: int
    cards_total: int
    cards_used: int
    cards_drained: int
    running_instances: int

    @property
    def cards_free(self) -> int:
        return max(self.cards_total - self.cards_used - self.cards_drained, 0)

    @property
    def used_percent(self) -> int:
        return round(100 * self.cards_used / self.cards_total) if self.cards_total else 0


def capacity() -> list[CapacityRow]:
    """Per zone and chip, from ``Node.cards_reserved`` (what instances hold) and the running instances. 4 queries."""
    idle_on_drained = Case(
        When(drained=True, then=F("cards") - F("cards_reserved")), default=0, output_field=IntegerField()
    )
    rows = (
        Node.objects.values("zone_id", "chip_id")
        .annotate(nodes=Count("id"), total=Sum("cards"), used=Sum("cards_reserved"), drained=Sum(idle_on_drained))
        .order_by()
    )
    running = {
        (r["zone_id"], r["chip_id"]): r["n"]
        for r in Instance.objects.filter(status=Status.RUNNING, chip__isnull=False)
        .values("zone_id", "chip_id")
        .annotate(n=Count("id"))
        .order_by()
    }
    rows = list(rows)
    zones = Zone.objects.in_bulk({r["zone_id"] for r in rows})
    chips = Chip.objects.in_bulk({r["chip_id"] for r in rows})
    found = [
        CapacityRow(
            zones[r["zone_id"]],
            chips[r["chip_id"]],
            r["nodes"],
            r["total"] or 0,
            r["used"] or 0,
            r["drained"] or 0,
            running.get((r["zone_id"], r["chip_id"]), 0),
        )
        for r in rows
    ]
    return sorted(found, key=lambda r: (r.zone.sort_order, r.zone.slug, r.chip.sort_order, r.chip.slug))


def nodes():
    return Node.objects.select_related("zone", "chip").order_by("zone__sort_order", "zone__slug", "name")


def snapshot_slot(at: datetime) -> datetime:
    return at.replace(minute=at.minute - at.minute % SNAPSHOT_MINUTES, second=0, microsecond=0)


def record_capacity_snapshot(at: datetime | None = None) -> int:
    """Write this slot's capacity rows (one per zone and chip). Idempotent: a second beat in the same slot, or a
    retried task, writes nothing more."""
    slot = snapshot_slot(at or timezone.now())
    if CapacitySnapshot.objects.filter(at=slot).exists():
        return 0
    rows = [
        CapacitySnapshot(
            at=slot,
            zone=r.zone,
            chip=r.chip,
            cards_total=r.cards_total,
            cards_used=r.cards_used,
            cards_drained=r.cards_drained,
            running_instances=r.running_instances,
        )
        for r in capacity()
    ]
    # A beat overlapping this one may insert the same slot meanwhile: the unique key keeps one row each.
    with transaction.atomic():
        CapacitySnapshot.objects.bulk_create(rows, ignore_conflicts=True)
    return len(rows)


def capacity_series(hours: int = 24, now: datetime | None = None) -> dict:
    """Cards in use per chip over the last ``hours`` (all zones added up), plus the total: the chart's data.
    Counts are plain integers; the chart is drawn by ``static/ops/capacity-chart.js``."""
    since = (now or timezone.now()) - timedelta(hours=hours)
    rows = (
        CapacitySnapshot.objects.filter(at__gte=since)
        .values("at", "chip__slug")
        .annotate(used=Sum("cards_used"), total=Sum("cards_total"))
        .order_by("at", "chip__slug")
    )
    slots: list[datetime] = []
    used: dict[str, dict[datetime, int]] = defaultdict(dict)
    total: dict[datetime, int] = defaultdict(int)
    for row in rows:
        if not slots or slots[-1] != row["at"]:
            slots.append(row["at"])
        used[row["chip__slug"]][row["at"]] = row["used"] or 0
        total[row["at"]] += row["total"] or 0
    labels = [slot_label(s) for s in slots]
    names = chip_names(used)
    datasets = [
        {"label": names.get(chip, chip), "slug": chip, "data": [series.get(s, 0) for s in slots]}
        for chip, series in sorted(used.items())
    ]
    return {"labels": labels, "datasets": datasets, "total": [total[s] for s in slots]}


# --- Revenue ----------------------------------------------------------------------------------------------------------


@dataclass
class Money:
    """Revenue in a period: what users paid and what subsidy programmes paid; the operator earns both."""

    payable: Decimal = ZERO
    subsidy: Decimal = ZERO

    @property
    def revenue(self) -> Decimal:
        return self.payable + self.subsidy

    def add(self, payable: Decimal, subsidy: Decimal) -> None:
        self.payable += payable
        self.subsidy += subsidy


@dataclass
class Revenue:
    today: Money
    month: Money
    by_chip: list[tuple[str, Money]] = field(default_factory=list)
    by_zone: list[tuple[str, Money]] = field(default_factory=list)
    by_plan: list[tuple[str, Money]] = field(default_factory=list)

    # The breakdowns keep slugs (as the ledger does); these rows put the catalog's names on them for the page.
    @property
    def chip_rows(self) -> list[tuple[str, Money]]:
        return _named(self.by_chip, chip_names)

    @property
    def zone_rows(self) -> list[tuple[str, Money]]:
        return _named(self.by_zone, zone_names)

    @property
    def plan_rows(self) -> list[tuple[str, Money]]:
        return _named(self.by_plan, plan_names)


def _named(groups: list[tuple[str, Money]], names_of) -> list[tuple[str, Money]]:
    names = names_of(key for key, _money in groups) | {STORAGE_GROUP: str(UsageKind.STORAGE.label)}
    return [(names.get(key, key), money) for key, money in groups]


def _local_midnight(day: date) -> datetime:
    return timezone.make_aware(datetime.combine(day, datetime.min.time()))


def _period(since: datetime, until: datetime) -> Money:
    totals = LedgerTransaction.objects.filter(
        kind__in=SPEND_KINDS, created_at__gte=since, created_at__lt=until
    ).aggregate(paid=Sum("user_amount"), subsidy=Sum("subsidy_amount"))
    return Money(-summed(totals["paid"]), summed(totals["subsidy"]))


def revenue(now: datetime | None = None) -> Revenue:
    """Today's and this month's revenue, and this month's by chip, zone and plan (from the ledger's spend
    transactions and the usage sessions they belong to). 5 queries."""
    now = now or timezone.now()
    today = timezone.localdate(now)
    month_since, month_until = month_bounds(today.replace(day=1))
    report = Revenue(
        today=_period(_local_midnight(today), _local_midnight(today + timedelta(days=1))),
        month=_period(month_since, month_until),
    )
    spend = LedgerTransaction.objects.filter(
        kind__in=SPEND_KINDS, created_at__gte=month_since, created_at__lt=month_until
    )
    metered = (
        spend.filter(usage_session__isnull=False)
        .values("usage_session__chip_slug", "usage_session__zone_slug", "usage_session__plan_slug")
        .annotate(paid=Sum("user_amount"), subsidy=Sum("subsidy_amount"))
        .order_by()
    )
    groups = [
        (
            r["usage_session__chip_slug"],
            r["usage_session__zone_slug"],
            r["usage_session__plan_slug"],
            r["paid"],
            r["subsidy"],
        )
        for r in metered
    ]
    # Without a usage session: prepaid plans, charged up front (their instance says what was bought), and the daily
    # storage charges (a "storage" row of their own in every breakdown, so each adds up to the month's total).
    unmetered = list(
        spend.filter(usage_session__isnull=True)
        .values("kind", "resource_id")
        .annotate(paid=Sum("user_amount"), subsidy=Sum("subsidy_amount"))
        .order_by()
    )
    upfront = [r["resource_id"] for r in unmetered if r["kind"] == TransactionKind.UPFRONT]
    bought = {
        i["public_id"]: i
        for i in Instance.objects.filter(public_id__in=upfront).values(
            "public_id", "chip__slug", "zone__slug", "plan__slug"
        )
    }
    for r in unmetered:
        if r["kind"] == TransactionKind.STORAGE:
            groups.append((STORAGE_GROUP, STORAGE_GROUP, STORAGE_GROUP, r["paid"], r["subsidy"]))
            continue
        i = bought.get(r["resource_id"], {}) if r["kind"] == TransactionKind.UPFRONT else {}
        groups.append((i.get("chip__slug"), i.get("zone__slug"), i.get("plan__slug"), r["paid"], r["subsidy"]))
    by = [defaultdict(Money), defaultdict(Money), defaultdict(Money)]
    for chip, zone, plan, paid, subsidy in groups:
        for index, key in enumerate((chip, zone, plan)):
            by[index][key or "—"].add(-summed(paid), summed(subsidy))
    ordered = [sorted(d.items(), key=lambda kv: -kv[1].revenue) for d in by]
    report.by_chip, report.by_zone, report.by_plan = ordered
    return report


# --- Subsidies --------------------------------------------------------------------------------------------------------


@dataclass
class ProgrammeSpend:
    programme: SubsidyProgramme
    this_month: Decimal
    unfunded: Decimal

    @property
    def used_percent(self) -> int | None:
        budget = self.programme.budget
        return None if not budget else min(round(100 * self.programme.spent / budget), 100)


def subsidy_spend(now: datetime | None = None) -> list[ProgrammeSpend]:
    """Every programme: spent in total and this month against its budget, and what the operator bore when a
    budget or cap ran out mid-run. 3 queries."""
    month = month_of(now or timezone.now())
    this_month = dict(
        SubsidyUsage.objects.filter(month=month)
        .values_list("programme_id")
        .annotate(total=Sum("amount"))
        .values_list("programme_id", "total")
    )
    unfunded = dict(
        UsageSession.objects.filter(programme__isnull=False)
        .values_list("programme_id")
        .annotate(total=Sum("subsidy_unfunded"))
        .values_list("programme_id", "total")
    )
    return [
        ProgrammeSpend(p, summed(this_month.get(p.pk)), summed(unfunded.get(p.pk)))
        for p in SubsidyProgramme.objects.prefetch_related("chips", "zones").order_by("-active", "slug")
    ]


# --- The reconciliation -----------------------------------------------------------------------------------------------


@dataclass
class ReconciliationRow:
    """One user's subsidised spend on one instance on one day under one programme."""

    day: date
    programme: str
    user_email: str
    resource_id: str
    label: str
    minutes: int = 0
    list_exact: Decimal = ZERO  # unrounded; rounded once per row
    subsidy: Decimal = ZERO
    payable: Decimal = ZERO

    @property
    def list_price(self) -> Decimal:
        return to_cents(self.list_exact)


RECONCILIATION_COLUMNS = [
    "day",
    "programme",
    "user",
    "instance_id",
    "instance",
    "billed_minutes",
    "list_price_cny",
    "subsidy_cny",
    "payable_cny",
]


def reconciliation(month: date) -> list[ReconciliationRow]:
    """The subsidy booked in ``month`` (local time), per day, programme, user and instance.

    Built from every ledger transaction that booked subsidy, so the subsidy column adds up to exactly what the
    ledger's programme accounts received. List price: the run's frozen list rate × its billed minutes (prepaid
    plans: what was paid plus the subsidy, before the plan and spot discounts).
    """
    since, until = month_bounds(month.replace(day=1))
    local = timezone.get_current_timezone()
    programme_of = LedgerEntry.objects.filter(transaction=OuterRef("pk"), account__kind=AccountKind.SUBSIDY).values(
        "account__programme__slug"
    )[:1]
    rows = (
        LedgerTransaction.objects.filter(subsidy_amount__gt=0, created_at__gte=since, created_at__lt=until)
        .annotate(programme_slug=Subquery(programme_of), day=TruncDate("created_at", tzinfo=local))
        .values_list(
            "day",
            "programme_slug",
            "user__email",
            "resource_id",
            "usage_session__label",
            "minutes",
            "usage_session__list_per_hour",
            "subsidy_amount",
            "user_amount",
        )
        .order_by("day", "programme_slug", "user__email", "resource_id")
    )
    grouped: dict[tuple, ReconciliationRow] = {}
    upfront: list[tuple[ReconciliationRow, Decimal, Decimal]] = []
    for day, programme, email, resource, label, minutes, list_rate, subsidy, paid in rows.iterator(2000):
        key = (day, programme, email, resource)
        row = grouped.get(key)
        if row is None:
            row = grouped[key] = ReconciliationRow(day, programme or "", email or "", str(resource or ""), label or "")
        row.subsidy += subsidy
        row.payable += -paid
        row.minutes += minutes
        if list_rate is not None:
            row.list_exact += Decimal(list_rate) * minutes / MINUTES_PER_HOUR
        else:
            upfront.append((row, subsidy, -paid))
    _list_for_upfront(upfront)
    return list(grouped.values())


def _list_for_upfront(items) -> None:
    """Prepaid plans: list = (paid + subsidy) ÷ (plan factor × spot factor), read from each instance's plan."""
    if not items:
        return
    ids = {row.resource_id for row, _s, _p in items}
    factors = {
        str(i.public_id): i.plan.factor * (i.plan.spot_factor if i.spot and i.plan.spot_factor else 1)
        for i in Instance.objects.filter(public_id__in=ids).select_related("plan")
    }
    for row, subsidy, paid in items:
        factor = factors.get(row.resource_id) or Decimal(1)
        row.list_exact += (subsidy + paid) / factor
        if not row.label:
            row.label = "prepaid"


class _Echo:
    def write(self, value):
        return value


def reconciliation_csv(month: date):
    """The reconciliation as CSV lines (a generator for a streaming response), with a totals line at the end."""
    writer = csvsafe.writer(_Echo())
    yield writer.writerow(RECONCILIATION_COLUMNS)
    totals = [0, ZERO, ZERO, ZERO]
    for r in reconciliation(month):
        yield writer.writerow(
            [
                r.day.isoformat(),
                r.programme,
                r.user_email,
                r.resource_id,
                r.label,
                r.minutes,
                r.list_price,
                r.subsidy,
                r.payable,
            ]
        )
        totals = [totals[0] + r.minutes, totals[1] + r.list_price, totals[2] + r.subsidy, totals[3] + r.payable]
    yield writer.writerow(["total", "", "", "", "", *totals])


def ledger_subsidy_total(month: date) -> Decimal:
    """What the programme accounts received in ``month``, straight from the ledger entries (the check for the CSV)."""
    since, until = month_bounds(month.replace(day=1))
    total = LedgerEntry.objects.filter(
        account__kind=AccountKind.SUBSIDY, transaction__created_at__gte=since, transaction__created_at__lt=until
    ).aggregate(total=Sum("amount"))["total"]
    return -summed(total)
