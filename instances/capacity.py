"""Cards: reserved and freed by compare-and-set, so concurrent launches never oversell a node.

A reservation is one conditional UPDATE on the node (``cards_reserved + n <= cards``); the database re-checks the
condition under the row lock, so of any number of concurrent launches exactly as many succeed as there are free
cards. A check constraint on the node refuses an oversold row whatever code path tries. The instance records the
cards it holds (``reserved_cards``) and freeing is a compare-and-set on that, so freeing twice frees once.
"""

from dataclasses import dataclass

from django.db import transaction
from django.db.models import F, Sum
from django.utils.translation import gettext as _

from catalog.models import Chip, Node, Zone
from console.errors import Unavailable

from .models import Instance

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


def reserve(nodes, cards: int) -> Node | None:
    """Reserve ``cards`` on one of ``nodes`` (a queryset), fullest first so large instances find empty nodes.
    Returns the node, or None when none has room. Call inside the transaction that records the holder."""
    for _round in range(RESERVE_ROUNDS):
        candidates = list(
            nodes.filter(drained=False, cards_reserved__lte=F("cards") - cards)
            .order_by("-cards_reserved", "pk")
            .values_list("pk", flat=True)
        )
        if not candidates:
            return None
        for pk in candidates:
            won = Node.objects.filter(pk=pk, cards_reserved__lte=F("cards") - cards).update(
                cards_reserved=F("cards_reserved") + cards
            )
            if won:
                return Node.objects.select_related("zone", "chip").get(pk=pk)
    return None


class _Raced(Exception):
    """A spot instance chosen for reclaiming changed meanwhile: undo the savepoint."""


def reclaim_from_spot(nodes, cards: int) -> tuple[Node, list[Instance]] | None:
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
            node = reserve(Node.objects.filter(pk=node_id), cards)
            if node is None:
                raise _Raced
    except _Raced:
        return None
    return node, list(Instance.objects.with_related().filter(pk__in=[pk for pk, _n in take]))


def hold(instance: Instance, node: Node, cards: int) -> None:
    """Record on the instance the cards just reserved on ``node`` (same transaction as ``reserve``)."""
    Instance.objects.filter(pk=instance.pk).update(node=node, reserved_cards=cards)
    instance.node, instance.reserved_cards = node, cards


@transaction.atomic
def free(instance: Instance) -> int:
    """Give back the cards ``instance`` holds; idempotent. Returns how many were freed."""
    held, node_id = Instance.objects.filter(pk=instance.pk).values_list("reserved_cards", "node_id").get()
    if not held or Instance.objects.filter(pk=instance.pk, reserved_cards=held).update(reserved_cards=0) == 0:
        instance.reserved_cards = 0
        return 0
    Node.objects.filter(pk=node_id).update(cards_reserved=F("cards_reserved") - held)
    instance.reserved_cards = 0
    return held


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


def capacity_summary():
    """Per chip: total and reserved cards on schedulable nodes (the wizard shows what is free)."""
    return {
        row["chip_id"]: row
        for row in Node.objects.schedulable()
        .values("chip_id")
        .annotate(total=Sum("cards"), reserved=Sum("cards_reserved"))
        .order_by()
    }
