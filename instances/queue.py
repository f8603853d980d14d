"""The console's one queue for cards: everything waiting for a card — launches that asked to wait, and the jobs
app's queued jobs — in one fair order, with each entry's place and an estimate of when it starts.

The rule: round by round, each place's oldest waiting entry, the places in the order of how long that entry has
waited. A place is an account; in a team's account each member has a place of their own, so a team shares one place
per member and no account's (or member's) backlog holds up another's.

Apps above this one (jobs) add their waiting entries and their machines' deadlines with :func:`register`; the
placement pass (``jobs.running.place_queued``) takes the entries in this order.
"""

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from .choices import ACTIVE
from .models import Instance, WaitingLaunch

JOB, LAUNCH = "job", "launch"  # the kinds of entry
PLACED, NO_ROOM, LEFT = "placed", "no room", "left"  # what a try to place an entry came to


@dataclass(frozen=True)
class Entry:
    """One thing waiting for a card. ``wants`` is what it waits for: (chip id or None, family, spot)."""

    kind: str
    pk: int
    owner_id: int
    person_id: int | None
    queued_at: datetime
    wants: tuple
    cards: int

    @property
    def key(self) -> tuple[str, int]:
        return (self.kind, self.pk)

    @property
    def place(self) -> tuple[int, int]:
        """Whose turn it takes: the account, and in it the person who asked (a team's members take turns apart)."""
        return (self.owner_id, self.person_id or self.owner_id)


_entry_sources: list[Callable[[], Iterable[Entry]]] = []
_end_sources: list[Callable[[], dict[int, datetime]]] = []


def register(entries: Callable[[], Iterable[Entry]], ends: Callable[[], dict[int, datetime]] | None = None) -> None:
    """Add an app's waiting entries to the queue, and (``ends``) the latest time each of its machines ends (instance
    id → time), which bounds the estimates. Called once from the app's ``ready()``."""
    if entries not in _entry_sources:
        _entry_sources.append(entries)
    if ends is not None and ends not in _end_sources:
        _end_sources.append(ends)


def waiting_launches() -> list[Entry]:
    rows = (
        WaitingLaunch.objects.filter(state=WaitingLaunch.State.WAITING)
        .order_by("queued_at", "pk")
        .values_list("pk", "owner_id", "launched_by_id", "queued_at", "chip_id", "family", "spot", "cards")
    )
    return [
        Entry(LAUNCH, pk, owner, person, at, (chip, family, spot), cards)
        for pk, owner, person, at, chip, family, spot, cards in rows
    ]


def fair_order(entries: Iterable[Entry]) -> list[Entry]:
    """``entries`` in the order placement tries them (the rule in this module's docstring)."""
    seen: dict[tuple[int, int], int] = {}
    ranked = []
    for entry in sorted(entries, key=lambda e: (e.queued_at, e.kind, e.pk)):
        rank = seen.get(entry.place, 0)
        seen[entry.place] = rank + 1
        ranked.append((rank, entry.queued_at, entry.kind, entry.pk, entry))
    return [row[-1] for row in sorted(ranked, key=lambda row: row[:-1])]


def order() -> list[Entry]:
    """Every waiting entry, of every kind, in the order placement tries them."""
    entries = waiting_launches()
    for source in _entry_sources:
        entries.extend(source())
    return fair_order(entries)


@dataclass(frozen=True)
class Place:
    """An entry's place in the queue (1: next) and the time by which it should start (None: nothing bounds it)."""

    position: int
    expected_by: datetime | None


def places(wanted: set[tuple[str, int]], *, now: datetime) -> dict[tuple[str, int], Place]:
    """(kind, pk) → Place of each of ``wanted`` still waiting. Nothing is read when nothing is wanted."""
    if not wanted:
        return {}
    queue = order()
    ends = _machine_ends(queue, now) if any(entry.key in wanted for entry in queue) else {}
    found, ahead = {}, {}
    for position, entry in enumerate(queue, start=1):
        kind = _kind(entry)
        ahead[kind] = ahead.get(kind, 0) + entry.cards
        if entry.key in wanted:
            found[entry.key] = Place(position, _expected_by(ends.get(kind, []), ahead[kind], entry.cards))
    return found


def _kind(entry: Entry) -> tuple:
    chip, family, _spot = entry.wants
    return ("chip", chip) if chip else ("family", family)


def _expected_by(ends: list[tuple[datetime, int, object]], needed: int, cards: int) -> datetime | None:
    """When the machines of this kind that have an end have freed ``needed`` cards (the cards the entries ahead of
    this one and this one wait for), ``cards`` of them on one node (a machine's cards are one node's): an honest
    bound only from machines that must end; None when they cannot free that many, or not that many on one node."""
    freed, on_node = 0, {}
    for at, count, node in ends:
        freed += count
        on_node[node] = on_node.get(node, 0) + count
        if freed >= needed and max(on_node.values()) >= cards:
            return at
    return None


def _machine_ends(queue: list[Entry], now: datetime) -> dict[tuple, list[tuple[datetime, int, object]]]:
    """kind of card → [(the latest time a machine of it ends, its cards, its node)], soonest first, for the active
    machines that must end: a job's deadline, an auto-shutdown time, a cluster's time limit. A machine with no node
    recorded (a cluster's scheduler places it) stands for a node of its own."""
    chips = {entry.wants[0] for entry in queue if entry.wants[0]}
    families = {entry.wants[1] for entry in queue if not entry.wants[0]}
    bounds: dict[int, datetime] = {}
    for source in _end_sources:
        bounds.update(source())
    rows = Instance.objects.filter(status__in=ACTIVE, cards__gt=0, chip__isnull=False).values_list(
        "pk", "chip_id", "chip__backend", "cards", "auto_shutdown_at", "running_since", "time_limit_minutes", "node_id"
    )
    found: dict[tuple, list[tuple[datetime, int, object]]] = {}
    for pk, chip, family, cards, shutdown_at, since, limit, node in rows:
        candidates = [bounds.get(pk), shutdown_at]
        if limit:
            candidates.append((since or now) + timedelta(minutes=limit))
        known = [at for at in candidates if at is not None]
        if not known:
            continue
        at = max(min(known), now)
        for kind in (("chip", chip) if chip in chips else None, ("family", family) if family in families else None):
            if kind is not None:
                found.setdefault(kind, []).append((at, cards, node if node is not None else ("machine", pk)))
    for ends in found.values():
        ends.sort(key=lambda end: end[0])
    return found
