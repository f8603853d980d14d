"""Cards, CPU and memory: reserved and freed by compare-and-set, so concurrent launches never oversell a host.

A reservation is one conditional UPDATE on the node (``cards_reserved + n <= cards`` and the same for CPU and
memory); the database re-checks the condition under the row lock, so of any number of concurrent launches exactly
as many succeed as there is room for. Check constraints on the node refuse an oversold row whatever code path tries.
The instance records what it holds (``reserved_cards``, ``reserved_cpu_millis``, ``reserved_memory_mb``) and freeing
is a compare-and-set on that, so freeing twice frees once. A machine holds CPU and memory exactly while it holds
cards (a CPU-only one: from its launch or start until it stops), and gives them back at the same moments.

A backend whose nodes all stand on one host (the local backend: the console's own host) counts CPU and memory once
for that host, in its ``HostLoad`` row, against what the host has (``Backend.host_capacity``); its nodes count only
cards. A CPU-only machine holds CPU and memory on one node of its zone (or on that host), never cards.
"""

from dataclasses import dataclass

from django.db import transaction
from django.db.models import F, Sum
from django.utils.translation import gettext as _

from catalog.models import Chip, InstanceSpec, Node, Zone
from core.errors import Unavailable

from .backends import BackendError, get_backend
from .models import HostLoad, Instance

# A full node may free up between reading the candidates and the compare-and-set; a couple of rounds suffice.
RESERVE_ROUNDS = 3


@dataclass(frozen=True)
class FreeCapacity:
    """Free cards of one chip in one zone."""

    zone: Zone
    chip: Chip
    free: int
    largest: int  # the most cards free on one node: an instance cannot span nodes

    def as_dict(self) -> dict:
        return {"zone": self.zone.slug, "chip": self.chip.slug, "free_cards": self.free, "max_cards": self.largest}


class CapacityError(Unavailable):
    """Out of capacity, with where cards *are* free (``alternatives``) and whether no-card mode is offered."""

    code = "no_capacity"

    def __init__(self, message, *, alternatives=(), no_card_offered=False, code=None):
        super().__init__(message, code=code)
        self.alternatives = list(alternatives)
        self.no_card_offered = no_card_offered

    def details(self) -> dict:
        return {"alternatives": [a.as_dict() for a in self.alternatives], "no_card_offered": self.no_card_offered}


@dataclass(frozen=True)
class Demand:
    """What a machine holds besides its cards: CPU in thousandths of a vCPU, memory in MB."""

    cpu_millis: int = 0
    memory_mb: int = 0


NOTHING = Demand()


def demand_for(backend_name: str, spec: InstanceSpec) -> Demand:
    """What a machine of ``spec`` holds on ``backend_name``: the spec's figures, or what the backend enforces."""
    cpu_millis, memory_mb = get_backend(backend_name).demand(spec)
    return Demand(cpu_millis, memory_mb)


def host_capacity(backend_name: str) -> Demand | None:
    """What the one host of ``backend_name`` has for machines, or None when its nodes count their own."""
    try:
        figures = get_backend(backend_name).host_capacity()
    except BackendError:
        return None
    return Demand(*figures) if figures is not None else None


def _fits(demand: Demand) -> dict:
    return {
        "cpu_millis_reserved__lte": F("vcpus") * 1000 - demand.cpu_millis,
        "memory_mb_reserved__lte": F("memory_gb") * 1024 - demand.memory_mb,
    }


def reserve(nodes, cards: int, demand: Demand = NOTHING) -> Node | None:
    """Reserve ``cards`` and ``demand`` on one of ``nodes`` (a queryset), fullest first so large instances find
    empty nodes. Returns the node, or None when none has room. On a backend whose nodes share one host only the
    cards go to the node and ``demand`` to the host: CapacityError when the host has no room for it. Call inside
    the transaction that records the holder (an error rolls the node's reservation back with it)."""
    for _round in range(RESERVE_ROUNDS):
        candidates = list(
            nodes.filter(drained=False, cards_reserved__lte=F("cards") - cards)
            .order_by("-cards_reserved", "pk")
            .values_list("pk", "backend_name")
        )
        if not candidates:
            return None
        for pk, backend_name in candidates:
            pooled = host_capacity(backend_name)
            on_node = NOTHING if pooled is not None else demand
            won = Node.objects.filter(pk=pk, cards_reserved__lte=F("cards") - cards, **_fits(on_node)).update(
                cards_reserved=F("cards_reserved") + cards,
                cpu_millis_reserved=F("cpu_millis_reserved") + on_node.cpu_millis,
                memory_mb_reserved=F("memory_mb_reserved") + on_node.memory_mb,
            )
            if won:
                if pooled is not None:
                    reserve_on_host(backend_name, demand, pooled)
                return Node.objects.select_related("zone", "chip").get(pk=pk)
    return None


def reserve_on_host(backend_name: str, demand: Demand, capacity: Demand) -> None:
    """Reserve ``demand`` on the one host of ``backend_name``, which has ``capacity``; CapacityError naming what
    ran out when it has no room. One compare-and-set on the host's row."""
    if demand == NOTHING:
        return
    for _round in range(2):
        won = HostLoad.objects.filter(
            backend_name=backend_name,
            cpu_millis_reserved__lte=capacity.cpu_millis - demand.cpu_millis,
            memory_mb_reserved__lte=capacity.memory_mb - demand.memory_mb,
        ).update(
            cpu_millis_reserved=F("cpu_millis_reserved") + demand.cpu_millis,
            memory_mb_reserved=F("memory_mb_reserved") + demand.memory_mb,
        )
        if won:
            return
        load = HostLoad.objects.filter(backend_name=backend_name).first()
        if load is None:  # the first reservation on this host: make its row, then try again
            HostLoad.objects.bulk_create([HostLoad(backend_name=backend_name)], ignore_conflicts=True)
            continue
        raise compute_shortage(
            demand, capacity, Demand(load.cpu_millis_reserved, load.memory_mb_reserved), where=_("the host")
        )
    raise compute_shortage(demand, capacity, demand, where=_("the host"))


def reserve_compute(instance: Instance, spec: InstanceSpec, nodes) -> None:
    """For a CPU-only machine (no cards): reserve what ``spec`` holds on the host of ``instance``'s backend, or on
    one of ``nodes`` (its node first when it has one), and record it on the instance. A zone without nodes has
    nothing to count against. CapacityError naming what ran out when there is no room."""
    demand = demand_for(instance.backend_name, spec)
    pooled = host_capacity(instance.backend_name)
    if pooled is not None:
        reserve_on_host(instance.backend_name, demand, pooled)
        hold(instance, instance.node, 0, demand)
        return
    if not nodes.exists():
        return
    home = nodes.filter(pk=instance.node_id) if instance.node_id else Node.objects.none()
    node = reserve(home, 0, demand) or reserve(nodes.exclude(pk=instance.node_id), 0, demand)
    if node is None:
        raise node_shortage(nodes, 0, demand) or CapacityError(_("No node of this zone takes new machines now."))
    hold(instance, node, 0, demand)


def node_shortage(nodes, cards: int, demand: Demand) -> "CapacityError | None":
    """Why none of ``nodes`` has room for ``cards`` and ``demand`` when some node has the cards but not the CPU or
    memory (naming which, with the roomiest such node's figures); None when the cards are what ran out."""
    row = (
        nodes.filter(drained=False, cards_reserved__lte=F("cards") - cards)
        .annotate(free_cpu=F("vcpus") * 1000 - F("cpu_millis_reserved"))
        .order_by("-free_cpu", "pk")
        .values("vcpus", "memory_gb", "cpu_millis_reserved", "memory_mb_reserved")
        .first()
    )
    if row is None:
        return None
    capacity = Demand(row["vcpus"] * 1000, row["memory_gb"] * 1024)
    held = Demand(row["cpu_millis_reserved"], row["memory_mb_reserved"])
    return compute_shortage(demand, capacity, held, where=_("any node of the zone"))


COMPUTE_SHORTAGE = frozenset({"no_cpu", "no_memory"})


def compute_shortage(demand: Demand, capacity: Demand, held: Demand, *, where: str) -> "CapacityError":
    """The refusal for a machine that needs ``demand`` where ``held`` of ``capacity`` is taken: which resource ran
    out, how much is free, how much it needs."""
    if held.cpu_millis + demand.cpu_millis > capacity.cpu_millis:
        message = _(
            "Not enough CPU on %(where)s for this machine: it needs %(need)s vCPUs and %(free)s of %(total)s are "
            "free (the rest are held by running machines). Try again when machines stop."
        ) % {
            "where": where,
            "need": _vcpus(demand.cpu_millis),
            "free": _vcpus(max(capacity.cpu_millis - held.cpu_millis, 0)),
            "total": _vcpus(capacity.cpu_millis),
        }
        return CapacityError(message, code="no_cpu")
    message = _(
        "Not enough memory on %(where)s for this machine: it needs %(need)s MB and %(free)s of %(total)s MB are "
        "free (the rest are held by running machines). Try again when machines stop."
    ) % {
        "where": where,
        "need": demand.memory_mb,
        "free": max(capacity.memory_mb - held.memory_mb, 0),
        "total": capacity.memory_mb,
    }
    return CapacityError(message, code="no_memory")


def _vcpus(millis: int) -> str:
    return f"{millis / 1000:g}"


class _Raced(Exception):
    """A spot instance chosen for reclaiming changed meanwhile: undo the savepoint."""


def reclaim_from_spot(nodes, cards: int, demand: Demand = NOTHING) -> tuple[Node, list[Instance]] | None:
    """For an on-demand launch that found no free node: ``cards`` on one of ``nodes`` taken from running spot
    instances there (SPEC §4: spot is preemptible). The node needing the fewest reclaimed cards wins; on it the
    newest spot instances go first (they have lost the least work). Their cards move to the caller's reservation
    in its transaction (compare-and-set on each holder, all or nothing); the caller preempts them, which gives them
    the checkpoint signal and the notice window. Returns (node, victims) or None when no node can free enough."""
    held = (
        Instance.objects.filter(node__in=nodes.filter(drained=False), spot=True, status="running", reserved_cards__gt=0)
        .order_by("-created_at", "-pk")
        .values_list("pk", "node_id", "reserved_cards")
    )
    by_node: dict[int, list[tuple[int, int]]] = {}
    for pk, node_id, n in held:
        by_node.setdefault(node_id, []).append((pk, n))
    free_on = dict(
        Node.objects.filter(pk__in=by_node).annotate(left=F("cards") - F("cards_reserved")).values_list("pk", "left")
    )
    best = None
    for node_id, spots in by_node.items():
        need, take = cards - free_on.get(node_id, 0), []
        for pk, n in spots:
            if sum(x for _pk, x in take) >= need:
                break
            take.append((pk, n))
        taken = sum(x for _pk, x in take)
        if taken >= need and (best is None or taken < best[1]):
            best = (node_id, taken, take)
    if best is None:
        return None
    node_id, _taken, take = best
    try:
        with transaction.atomic():  # a savepoint: every victim's cards move, or none
            for pk, n in take:
                if not Instance.objects.filter(pk=pk, status="running", reserved_cards=n).update(reserved_cards=0):
                    raise _Raced
                Node.objects.filter(pk=node_id).update(cards_reserved=F("cards_reserved") - n)
                _free_compute(pk)  # its CPU and memory go with its cards
            node = reserve(Node.objects.filter(pk=node_id), cards, demand)
            if node is None:
                raise _Raced
    except _Raced:
        return None
    return node, list(Instance.objects.with_related().filter(pk__in=[pk for pk, _n in take]))


def hold(instance: Instance, node: Node | None, cards: int, demand: Demand = NOTHING) -> None:
    """Record on the instance the cards and ``demand`` just reserved on ``node`` (or its backend's host), in the
    same transaction as ``reserve``."""
    Instance.objects.filter(pk=instance.pk).update(
        node=node, reserved_cards=cards, reserved_cpu_millis=demand.cpu_millis, reserved_memory_mb=demand.memory_mb
    )
    instance.node, instance.reserved_cards = node, cards
    instance.reserved_cpu_millis, instance.reserved_memory_mb = demand.cpu_millis, demand.memory_mb


@transaction.atomic
def free(instance: Instance) -> int:
    """Give back the cards, CPU and memory ``instance`` holds; idempotent. Returns how many cards were freed."""
    _free_compute(instance.pk)
    instance.reserved_cpu_millis = instance.reserved_memory_mb = 0
    held, node_id = Instance.objects.filter(pk=instance.pk).values_list("reserved_cards", "node_id").get()
    if not held or Instance.objects.filter(pk=instance.pk, reserved_cards=held).update(reserved_cards=0) == 0:
        instance.reserved_cards = 0
        return 0
    Node.objects.filter(pk=node_id).update(cards_reserved=F("cards_reserved") - held)
    instance.reserved_cards = 0
    return held


def _free_compute(pk: int) -> None:
    """Give back the CPU and memory instance ``pk`` holds, to its node or its backend's host; idempotent."""
    cpu, memory, node_id, backend_name = (
        Instance.objects.filter(pk=pk)
        .values_list("reserved_cpu_millis", "reserved_memory_mb", "node_id", "backend_name")
        .get()
    )
    if not (cpu or memory):
        return
    if not Instance.objects.filter(pk=pk, reserved_cpu_millis=cpu, reserved_memory_mb=memory).update(
        reserved_cpu_millis=0, reserved_memory_mb=0
    ):
        return  # freed meanwhile
    given_back = {
        "cpu_millis_reserved": F("cpu_millis_reserved") - cpu,
        "memory_mb_reserved": F("memory_mb_reserved") - memory,
    }
    if host_capacity(backend_name) is not None:
        HostLoad.objects.filter(backend_name=backend_name).update(**given_back)
    elif node_id is not None:
        Node.objects.filter(pk=node_id).update(**given_back)


def free_capacity(*, chips=None, zone=None, min_cards: int = 1) -> list[FreeCapacity]:
    """Where cards are free now (of ``chips`` / in ``zone`` when given), most free first. Two queries."""
    nodes = Node.objects.schedulable().filter(cards_reserved__lte=F("cards") - min_cards)
    if chips is not None:
        nodes = nodes.filter(chip__in=chips)
    if zone is not None:
        nodes = nodes.filter(zone=zone)
    rows = list(nodes.values("zone_id", "chip_id", "cards", "cards_reserved"))
    if not rows:
        return []
    zones = Zone.objects.in_bulk({r["zone_id"] for r in rows})
    chip_rows = Chip.objects.in_bulk({r["chip_id"] for r in rows})
    totals: dict[tuple[int, int], list[int]] = {}
    for row in rows:
        free_here = row["cards"] - row["cards_reserved"]
        entry = totals.setdefault((row["zone_id"], row["chip_id"]), [0, 0])
        entry[0] += free_here
        entry[1] = max(entry[1], free_here)
    found = [FreeCapacity(zones[z], chip_rows[c], total, largest) for (z, c), (total, largest) in totals.items()]
    return sorted(found, key=lambda f: (-f.free, f.zone.sort_order, f.chip.sort_order))


def free_cards(chips) -> dict[int, int]:
    """Chip id → the cards free now on its schedulable nodes (those with one free card at least), for ``chips``.
    One query: the totals of :func:`free_capacity`, without where they are."""
    nodes = Node.objects.schedulable().filter(cards_reserved__lte=F("cards") - 1, chip__in=chips)
    totals = nodes.values("chip_id").annotate(free=Sum(F("cards") - F("cards_reserved"))).order_by()
    return {row["chip_id"]: row["free"] for row in totals}


def describe(alternatives: list[FreeCapacity]) -> str:
    parts = [
        _("%(chip)s in %(zone)s (%(free)s cards free, up to %(max)s on one node)")
        % {"chip": a.chip.label, "zone": a.zone.label, "free": a.free, "max": a.largest}
        for a in alternatives
    ]
    return "; ".join(parts)


def out_of_capacity(what: str, *, chips=None, cards: int = 1, no_card_offered=False) -> CapacityError:
    """The error for "no room for ``what``", naming where the chip (or any chip) is free right now."""
    alternatives = free_capacity(chips=chips, min_cards=cards) or free_capacity(min_cards=1)
    if alternatives:
        message = _("No free cards for %(what)s right now. Free now: %(where)s.") % {
            "what": what,
            "where": describe(alternatives),
        }
    else:
        message = _("No free cards for %(what)s right now, and no other chip has free cards either.") % {"what": what}
    if no_card_offered:
        message += " " + _("You can start it in no-card mode (CPU only) to reach your data meanwhile.")
    return CapacityError(message, alternatives=alternatives, no_card_offered=no_card_offered)
