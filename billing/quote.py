"""The one quote function: every price the product shows or charges comes from ``quote()``.

payable = list × plan factor × spot factor × (1 − subsidy rate), where the subsidy is also limited by what the
programme has left and by the user's remaining monthly cap. Per-hour figures keep six decimal places; totals for
a term are rounded once, to the fen. Each discount line is the difference of two rounded running totals, so the
lines of a breakdown always add up to the payable amount.

Pages that show many prices load a :class:`PriceBook` once (a fixed number of queries) and pass it to every
``quote()`` call; a quote with a book reads nothing more from the database. What a book holds for everyone is built
once per price version (``billing.price_version``) and shared by the requests of a process; what changes with every
charge — what programmes have spent, the user's subsidy usage — is read for every book.
"""

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from decimal import Decimal
from types import MappingProxyType

from django.core.exceptions import ValidationError
from django.db.models import Value
from django.utils import timezone
from django.utils.translation import gettext as _

from catalog.models import Chip, InstanceSpec, Zone, check_zone_accepts
from catalog.services import zone_offers
from core.errors import NotFound, ServiceError

from . import price_version
from .models import Plan, Price, StoragePrice, SubsidyProgramme, SubsidyUsage
from .money import CURRENCY, MINUTES_PER_HOUR, ONE, ZERO, to_cents, to_rate
from .rules import month_of
from .subsidies import ProgrammeTerms

PAY_AS_YOU_GO = "payg"
HOURS_PER_DAY = 24
DAYS_PER_MONTH = 30
MAX_CARDS = 100_000
# Ten years: longer terms are input mistakes, not quotes.
MAX_TERM_MINUTES = 10 * 365 * 24 * 60


@dataclass(frozen=True)
class PriceEntry:
    per_hour: Decimal
    effective_from: datetime


@dataclass(frozen=True)
class PriceBook:
    """Everything a quote reads, loaded at one moment: prices in force, plans, running programmes, where each
    chip is offered, and the user's subsidy usage this month."""

    at: datetime
    prices: Mapping[int | None, PriceEntry]
    plans: Mapping[str, Plan]
    programmes: tuple[ProgrammeTerms, ...]
    offers: Mapping[int, tuple[Zone, ...]]
    user: object = None
    usage: Mapping[int, Decimal] = field(default_factory=dict)
    # What the book is built from, for everyone: the price version and the span of time it serves. With the
    # programmes' budgets left, it names everything a page of this book's public prices shows.
    version: tuple = ()

    def price_for(self, chip_id: int | None) -> PriceEntry | None:
        return self.prices.get(chip_id)

    def public_state(self) -> tuple:
        """What a page of this book's public prices shows, as a key: the version and span, and each programme's
        budget left (a programme that runs out stops subsidising)."""
        return self.version, tuple((programme.id, programme.remaining) for programme in self.programmes)

    def state(self) -> tuple:
        """What every quote from this book depends on, as a key: its public state, the programmes that admit its
        user (a student's, an enterprise's) and what the user was subsidised this month. Two books with the same
        state quote the same prices, whoever they were loaded for."""
        admitted = tuple(programme.id for programme in self.programmes if programme.admits(self.user))
        return self.public_state(), admitted, tuple(sorted(self.usage.items()))

    def default_zone(self, chip_id: int | None) -> Zone | None:
        zones = self.offers.get(chip_id, ()) if chip_id is not None else ()
        return zones[0] if zones else None


@dataclass(frozen=True)
class SharedBook:
    """The part of a price book that is the same for every user — prices in force, plans, running programmes'
    terms and where each chip is offered — for the moments ``since <= at < until`` (None: unbounded), built under
    the price version ``version``. Programme terms leave out what is left of a budget (``remaining`` is None):
    ``spent`` moves with every charge, so it is read fresh for every book, with the ``budgets`` kept here."""

    version: object
    since: datetime | None
    until: datetime | None
    prices: Mapping[int | None, PriceEntry]
    plans: Mapping[str, Plan]
    programmes: tuple[ProgrammeTerms, ...]
    budgets: Mapping[int, Decimal]
    offers: Mapping[int, tuple[Zone, ...]]

    def serves(self, version, at: datetime) -> bool:
        """Whether this is the book for moment ``at`` under price version ``version``."""
        return (
            version == self.version
            and (self.since is None or self.since <= at)
            and (self.until is None or at < self.until)
        )

    def programmes_with(self, spent: Mapping[int, Decimal]) -> tuple[ProgrammeTerms, ...]:
        """The programmes' terms with what each budget has left after ``spent``."""
        return tuple(
            p.with_spent(self.budgets[p.id], spent[p.id]) if p.id in self.budgets else p for p in self.programmes
        )


class _Span:
    """The span of moments around ``at`` between the nearest boundaries seen (a boundary starts its own span)."""

    def __init__(self, at: datetime):
        self.at, self.since, self.until = at, None, None

    def see(self, moment: datetime | None) -> None:
        if moment is None:
            return
        if moment <= self.at:
            self.since = moment if self.since is None else max(self.since, moment)
        else:
            self.until = moment if self.until is None else min(self.until, moment)


# This process's shared price book: built once per price version and reused while it serves the moment asked for.
_shared: SharedBook | None = None


def forget_shared_book() -> None:
    """Drop this process's shared price book (tests start each from none, as each starts with an empty cache)."""
    global _shared
    _shared = None


def _load_prices(at, span: _Span) -> dict[int | None, PriceEntry]:
    """The prices in force at ``at``. Every row, later ones too, is a boundary of the span they stay in force."""
    prices: dict[int | None, PriceEntry] = {}
    for row in Price.objects.order_by("chip_id", "-effective_from").values("chip_id", "per_hour", "effective_from"):
        span.see(row["effective_from"])
        if row["effective_from"] <= at:
            prices.setdefault(row["chip_id"], PriceEntry(row["per_hour"], row["effective_from"]))
    return prices


def _programme_places(ids) -> tuple[dict[int, list[int]], dict[int, list[int]]]:
    """programme id → its chip ids, and → its zone ids: both many-to-many tables in one query."""
    chips_table, zones_table = SubsidyProgramme.chips.through, SubsidyProgramme.zones.through
    rows = (
        chips_table.objects.filter(subsidyprogramme_id__in=ids)
        .values_list("subsidyprogramme_id", "chip_id", Value(True))
        .union(
            zones_table.objects.filter(subsidyprogramme_id__in=ids).values_list(
                "subsidyprogramme_id", "zone_id", Value(False)
            ),
            all=True,
        )
    )
    chips: dict[int, list[int]] = {}
    zones: dict[int, list[int]] = {}
    for programme_id, place_id, is_chip in rows:
        (chips if is_chip else zones).setdefault(programme_id, []).append(place_id)
    return chips, zones


def _load_programmes(at, span: _Span) -> tuple[list[SubsidyProgramme], dict[int, list[int]], dict[int, list[int]]]:
    """The programmes running at ``at`` with their chips and zones. Every switched-on programme's start and end
    are boundaries of the span."""
    running = []
    for programme in SubsidyProgramme.objects.filter(active=True):
        span.see(programme.starts_at)
        span.see(programme.ends_at)
        if programme.runs_at(at):
            running.append(programme)
    chips, zones = _programme_places([p.pk for p in running]) if running else ({}, {})
    return running, chips, zones


def _build_shared(version, at) -> tuple[SharedBook, dict[int, Decimal]]:
    """Build the shared book for ``at`` from the database; also what each programme has spent as read now."""
    span = _Span(at)
    prices = _load_prices(at, span)
    running, chips, zones = _load_programmes(at, span)
    terms = tuple(
        replace(
            ProgrammeTerms.from_programme(p, chip_ids=chips.get(p.pk, ()), zone_ids=zones.get(p.pk, ())), remaining=None
        )
        for p in running
    )
    offers = {chip_id: tuple(o.zone for o in chip_offers) for chip_id, chip_offers in zone_offers().items()}
    shared = SharedBook(
        version=version,
        since=span.since,
        until=span.until,
        prices=MappingProxyType(prices),
        plans=MappingProxyType({plan.slug: plan for plan in Plan.objects.active()}),
        programmes=terms,
        budgets=MappingProxyType({p.pk: p.budget for p in running if p.budget is not None}),
        offers=MappingProxyType(offers),
    )
    return shared, {p.pk: p.spent for p in running}


def _live(budgeted, user, at, programmes) -> tuple[dict[int, Decimal], dict[int, Decimal]]:
    """What the ``budgeted`` programmes have spent, and what ``user`` was subsidised this month by ``programmes``
    (ids), read now: both move with every charge. One query for both (none with nothing to read)."""
    reads = []
    if budgeted:
        spent = SubsidyProgramme.objects.filter(pk__in=budgeted).order_by()
        reads.append(spent.values_list("pk", "spent", Value(True)))
    if getattr(user, "is_authenticated", False) and programmes:
        usage = SubsidyUsage.objects.for_user(user).filter(month=month_of(at), programme_id__in=programmes).order_by()
        reads.append(usage.values_list("programme_id", "amount", Value(False)))
    if not reads:
        return {}, {}
    rows = reads[0].union(*reads[1:], all=True) if len(reads) > 1 else reads[0]
    spent_by, used_by = {}, {}
    for programme_id, amount, is_spent in rows:
        (spent_by if is_spent else used_by)[programme_id] = amount
    return spent_by, used_by


def _shared_book(at, user) -> tuple[SharedBook, dict[int, Decimal], dict[int, Decimal]]:
    """The shared book for ``at``, what its budgeted programmes have spent now and what ``user`` was subsidised by
    its programmes this month. The book is reused while the price version is unchanged and ``at`` lies in its span;
    one built for another moment (a quote for the past or the future) is kept only if it also serves now."""
    global _shared
    version = price_version.current()
    shared = _shared
    if shared is not None and shared.serves(version, at):
        spent, usage = _live(list(shared.budgets), user, at, [p.id for p in shared.programmes])
        # A programme deleted since the version was read has nothing left to give.
        return shared, {pid: spent.get(pid, shared.budgets[pid]) for pid in shared.budgets}, usage
    shared, spent = _build_shared(version, at)
    if shared.serves(version, timezone.now()):
        _shared = shared
    return shared, spent, _load_usage(user, at, shared.programmes)


def _load_usage(user, at, programmes) -> dict[int, Decimal]:
    return _live((), user, at, [p.id for p in programmes])[1]


def load_price_book(*, at: datetime | None = None, user=None, person=None) -> PriceBook:
    """Load a price book at ``at`` (default: now) for ``user`` (optional) in a fixed number of queries. ``person``:
    whose monthly subsidy caps apply when ``user`` is a team's account (the member who launches), else the user's.

    What is the same for everyone comes from this process's shared book while the price version stands (one query
    to check it); what programmes have spent and the user's subsidy usage are read every time (one more)."""
    at = at or timezone.now()
    shared, spent, usage = _shared_book(at, person or user)
    return PriceBook(
        at=at,
        prices=shared.prices,
        plans=shared.plans,
        programmes=shared.programmes_with(spent),
        offers=shared.offers,
        user=user,
        usage=usage,
        version=(shared.version, shared.since, shared.until),
    )


@dataclass(frozen=True)
class Quote:
    """A price breakdown in CNY. ``*_per_hour`` for the whole instance (all its cards); ``*_total`` for the
    billed term. Discounts and the subsidy are positive amounts taken off the list price."""

    chip_slug: str | None
    chip_name: str
    cards: int
    zone_slug: str | None
    zone_name: str
    plan_slug: str
    plan_name: str
    spot: bool
    minutes: int
    billed_minutes: int
    price_effective_from: datetime
    list_per_card_hour: Decimal
    list_per_hour: Decimal
    plan_discount_per_hour: Decimal
    spot_discount_per_hour: Decimal
    subsidy_per_hour: Decimal
    payable_per_hour: Decimal
    payable_per_card_hour: Decimal
    payable_per_minute: Decimal
    list_total: Decimal
    plan_discount_total: Decimal
    spot_discount_total: Decimal
    subsidy_total: Decimal
    payable_total: Decimal
    programme: ProgrammeTerms | None
    subsidy_rate: Decimal
    subsidy_limited: bool
    currency: str = CURRENCY

    @property
    def billed_hours(self) -> Decimal:
        return Decimal(self.billed_minutes) / MINUTES_PER_HOUR

    @property
    def discount_total(self) -> Decimal:
        return self.plan_discount_total + self.spot_discount_total + self.subsidy_total


def _term_minutes(minutes, hours) -> int:
    if (minutes is None) == (hours is None):
        if minutes is None:
            return MINUTES_PER_HOUR
        raise ServiceError(_("Give the term in minutes or in hours, not both."), code="invalid_term")
    try:
        value = Decimal(minutes if minutes is not None else hours)
    except (ArithmeticError, TypeError, ValueError) as exc:
        raise ServiceError(_("The term must be a number."), code="invalid_term") from exc
    if not value.is_finite() or value <= 0:
        raise ServiceError(_("The term must be greater than zero."), code="invalid_term")
    if value > MAX_TERM_MINUTES:  # checked before converting so that absurd numbers never reach ceil()
        raise ServiceError(_("The term can be at most ten years."), code="invalid_term")
    total = value if minutes is not None else value * MINUTES_PER_HOUR
    result = math.ceil(total)
    if result > MAX_TERM_MINUTES:
        raise ServiceError(_("The term can be at most ten years."), code="invalid_term")
    return result


def _check_cards(chip: Chip | None, cards: int | None) -> int:
    if chip is None:
        if cards not in (None, 0):
            raise ServiceError(_("The no-card mode has no cards."), code="invalid_cards")
        return 0
    if not chip.rentable:
        raise ServiceError(_("%(chip)s is not for rent.") % {"chip": chip.label}, code="not_rentable")
    cards = 1 if cards is None else cards
    if isinstance(cards, bool) or not isinstance(cards, int) or not 1 <= cards <= MAX_CARDS:
        raise ServiceError(
            _("The number of cards must be a whole number from 1 to %(max)s.") % {"max": MAX_CARDS},
            code="invalid_cards",
        )
    return cards


def _resolve_zone(book: PriceBook, chip: Chip | None, zone: Zone | None) -> Zone | None:
    if chip is None:
        return zone
    if zone is None:
        return book.default_zone(chip.pk)
    try:
        check_zone_accepts(zone, chip)
    except ValidationError as exc:
        raise ServiceError(exc.messages[0], code="xinchuang_zone_domestic_only") from exc
    offered = book.offers.get(chip.pk, ())
    if offered and zone.pk not in {z.pk for z in offered}:
        names = ", ".join(z.label for z in offered)
        raise ServiceError(
            _("%(chip)s is not offered in %(zone)s; it is offered in: %(zones)s.")
            % {"chip": chip.label, "zone": zone.label, "zones": names},
            code="not_offered_in_zone",
        )
    return zone


def _resolve_plan(book: PriceBook, plan: Plan | str, spot: bool) -> Plan:
    slug = plan.slug if isinstance(plan, Plan) else plan
    resolved = book.plans.get(slug)
    if resolved is None:
        raise NotFound(_("Unknown plan “%(plan)s”.") % {"plan": slug}, code="unknown_plan")
    if spot and not resolved.allows_spot:
        raise ServiceError(
            _("Spot instances are offered with pay-as-you-go only, not with the %(plan)s plan.")
            % {"plan": resolved.label},
            code="spot_not_offered",
        )
    return resolved


def _best_programme(book: PriceBook, chip_id, zone_id) -> ProgrammeTerms | None:
    """The applicable programme with the highest rate: programmes do not stack."""
    candidates = [p for p in book.programmes if p.covers(chip_id, zone_id) and p.admits(book.user)]
    return max(candidates, key=lambda p: (p.rate, -p.id), default=None)


def _book_for(book, at, user) -> PriceBook:
    if book is None:
        return load_price_book(at=at, user=user)
    if at is not None and at != book.at:
        raise ValueError("quote(): `at` differs from the price book's moment")
    if user is not None and user is not book.user:
        programmes = book.programmes
        return replace(book, user=user, usage=_load_usage(user, book.at, programmes))
    return book


def quote(
    *,
    chip: Chip | None = None,
    cards: int | None = None,
    spec: InstanceSpec | None = None,
    zone: Zone | None = None,
    plan: Plan | str = PAY_AS_YOU_GO,
    spot: bool = False,
    user=None,
    minutes: int | None = None,
    hours: Decimal | int | None = None,
    at: datetime | None = None,
    book: PriceBook | None = None,
) -> Quote:
    """Price ``cards`` cards of ``chip`` (or a ``spec``; no chip means the CPU-only no-card mode) in ``zone``
    (default: where the chip is offered, Xinchuang zone first) on ``plan``, optionally as spot, for ``user``
    (optional) over a term in ``minutes`` or ``hours`` (default one hour) at moment ``at`` (default now).

    Prepaid plans bill whole periods: a 5-hour term on the daily plan is one day. Raises ServiceError for
    anything the product would refuse.
    """
    if spec is not None:
        if chip is not None or cards is not None:
            raise ServiceError(_("Give a spec or a chip and cards, not both."), code="invalid_spec")
        chip, cards = spec.chip, spec.cards
    cards = _check_cards(chip, cards)
    term = _term_minutes(minutes, hours)
    book = _book_for(book, at, user)
    zone = _resolve_zone(book, chip, zone)
    plan = _resolve_plan(book, plan, spot)
    price = book.price_for(chip.pk if chip else None)
    if price is None:
        what = chip.label if chip else _("the no-card mode")
        raise ServiceError(_("No price is published for %(what)s yet.") % {"what": what}, code="no_price")
    programme = _best_programme(book, chip.pk if chip else None, zone.pk if zone else None)
    billed = math.ceil(term / plan.period_minutes) * plan.period_minutes
    return _breakdown(
        chip=chip,
        cards=cards,
        zone=zone,
        plan=plan,
        spot=spot,
        minutes=term,
        billed=billed,
        price=price,
        programme=programme,
        usage=book.usage,
    )


def _cascade(list_amount, after_plan, after_spot, payable, rounder):
    """Round the running totals, then take each line as the difference of neighbours: lines add up exactly."""
    steps = [rounder(x) for x in (list_amount, after_plan, after_spot, payable)]
    return steps[0], steps[0] - steps[1], steps[1] - steps[2], steps[2] - steps[3], steps[3]


def _breakdown(*, chip, cards, zone, plan, spot, minutes, billed, price, programme, usage) -> Quote:
    units = max(cards, 1)
    list_per_hour = price.per_hour * units
    after_plan = list_per_hour * plan.factor
    after_spot = after_plan * (plan.spot_factor if spot else ONE)
    rate = programme.rate if programme else ZERO
    available = programme.available(usage.get(programme.id, ZERO)) if programme else None

    def subsidy(amount):
        full = amount * rate
        return full if available is None else min(full, available)

    hours = Decimal(billed) / MINUTES_PER_HOUR
    sub_hour, sub_term = subsidy(after_spot), subsidy(after_spot * hours)
    hourly = _cascade(list_per_hour, after_plan, after_spot, after_spot - sub_hour, to_rate)
    total = _cascade(
        list_per_hour * hours, after_plan * hours, after_spot * hours, after_spot * hours - sub_term, to_cents
    )
    payable_hour = after_spot - sub_hour
    return Quote(
        chip_slug=chip.slug if chip else None,
        chip_name=chip.label if chip else _("No-card mode (CPU only)"),
        cards=cards,
        zone_slug=zone.slug if zone else None,
        zone_name=zone.label if zone else "",
        plan_slug=plan.slug,
        plan_name=plan.label,
        spot=spot,
        minutes=minutes,
        billed_minutes=billed,
        price_effective_from=price.effective_from,
        list_per_card_hour=to_rate(price.per_hour),
        list_per_hour=hourly[0],
        plan_discount_per_hour=hourly[1],
        spot_discount_per_hour=hourly[2],
        subsidy_per_hour=hourly[3],
        payable_per_hour=hourly[4],
        payable_per_card_hour=to_rate(payable_hour / units),
        payable_per_minute=to_rate(payable_hour / MINUTES_PER_HOUR),
        list_total=total[0],
        plan_discount_total=total[1],
        spot_discount_total=total[2],
        subsidy_total=total[3],
        payable_total=total[4],
        programme=programme if rate > 0 else None,
        subsidy_rate=rate,
        subsidy_limited=available is not None and after_spot * hours * rate > available,
    )


# Storage: cloud disks and cloud storage, per GB-day ---------------------------------------------------------------


@dataclass(frozen=True)
class StorageQuote:
    """The price of ``size_gb`` GB of a cloud disk (or of billable cloud storage) in CNY.

    Metering charges per minute at ``payable_per_hour`` (``size × per GB-day / 24``, kept to six decimal places),
    so a whole day is charged exactly ``size × per GB-day`` to the fen for any period up to a year (the rounding
    of the hourly rate adds at most ¥0.0000005 an hour). The attributes the metering reads from a compute
    :class:`Quote` (plan, chip, cards, zone, spot, the subsidy) are here too: storage is pay-as-you-go,
    unsubsidised, and paid from cash only."""

    resource: str
    size_gb: int
    per_gb_day: Decimal
    per_day: Decimal
    per_month: Decimal
    payable_per_hour: Decimal
    price_effective_from: datetime
    zone_slug: str | None = None
    zone_name: str = ""
    plan_slug: str = PAY_AS_YOU_GO
    chip_slug: str | None = None
    cards: int = 0
    spot: bool = False
    subsidy_per_hour: Decimal = ZERO
    programme: ProgrammeTerms | None = None
    currency: str = CURRENCY

    @property
    def list_per_hour(self) -> Decimal:
        return self.payable_per_hour


def storage_price(resource: str, at: datetime | None = None) -> StoragePrice:
    """The per-GB-day price of ``resource`` (``disk`` or ``storage``) in force at ``at`` (default now)."""
    in_force = StoragePrice.objects.filter(resource=resource, effective_from__lte=at or timezone.now())
    price = in_force.order_by("-effective_from").first()
    if price is None:
        raise ServiceError(
            _("No price per GB-day is published for %(what)s yet.") % {"what": resource}, code="no_price"
        )
    return price


def storage_prices(at: datetime | None = None) -> dict[str, StoragePrice]:
    """resource → the per-GB-day price in force at ``at`` for every resource that has one, in one query."""
    rows = StoragePrice.objects.filter(effective_from__lte=at or timezone.now()).order_by("resource", "-effective_from")
    prices: dict[str, StoragePrice] = {}
    for row in rows:
        prices.setdefault(row.resource, row)
    return prices


def quote_storage(
    resource: str,
    size_gb: int,
    *,
    zone: Zone | None = None,
    at: datetime | None = None,
    price: StoragePrice | None = None,
) -> StorageQuote:
    """THE price of storage: ``size_gb`` GB of ``resource`` (``disk``: a cloud disk; ``storage``: cloud storage
    beyond the free tier) per hour, day and 30-day month at the price in force at ``at``. Pages that price many
    disks pass the ``price`` row they loaded once (:func:`storage_price`)."""
    if isinstance(size_gb, bool) or not isinstance(size_gb, int) or size_gb < 0:
        raise ServiceError(_("The size must be a whole number of GB."), code="invalid_size")
    price = price or storage_price(resource, at)
    per_day = size_gb * price.per_gb_day
    return StorageQuote(
        resource=resource,
        size_gb=size_gb,
        per_gb_day=price.per_gb_day,
        per_day=to_rate(per_day),
        per_month=to_cents(per_day * DAYS_PER_MONTH),
        payable_per_hour=to_rate(per_day / HOURS_PER_DAY),
        price_effective_from=price.effective_from,
        zone_slug=zone.slug if zone else None,
        zone_name=zone.label if zone else "",
    )


def quote_disk(size_gb: int, *, zone: Zone | None = None, at: datetime | None = None, price=None) -> StorageQuote:
    """The price of a cloud disk of ``size_gb`` GB (see :func:`quote_storage`)."""
    return quote_storage("disk", size_gb, zone=zone, at=at, price=price)
