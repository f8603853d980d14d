"""The catalog's operations: adding nodes, and reading what a request names or where a chip is offered."""

from dataclasses import dataclass

from django.core.exceptions import ValidationError
from django.db.models import Count, Sum
from django.utils.translation import gettext as _

from core.errors import NotFound, ServiceError

from .models import Chip, Node, Zone


def add_node(*, zone: Zone, chip: Chip, name: str, cards: int, backend_name: str = "simulated") -> Node:
    """Create a node, refusing a foreign chip in the Xinchuang zone (the model's validation says why)."""
    node = Node(zone=zone, chip=chip, name=name, cards=cards, backend_name=backend_name)
    try:
        node.full_clean()
    except ValidationError as exc:
        raise ServiceError(" ".join(exc.messages), code="invalid_node") from exc
    node.save()
    return node


def get_chip(slug: str) -> Chip:
    """The chip a request names; an unknown slug is a reference to nothing: 404 ``unknown_chip``."""
    chip = Chip.objects.for_user(None).filter(slug=slug).first() if slug else None
    if chip is None:
        raise NotFound(_("Unknown chip “%(slug)s”.") % {"slug": slug}, code="unknown_chip")
    return chip


def get_zone(slug: str) -> Zone:
    zone = Zone.objects.active().filter(slug=slug).select_related("region").first() if slug else None
    if zone is None:
        raise NotFound(_("Unknown zone “%(slug)s”.") % {"slug": slug}, code="unknown_zone")
    return zone


@dataclass(frozen=True)
class Offer:
    """A chip offered in a zone, with its capacity in cards on schedulable nodes."""

    zone: Zone
    chip_id: int
    nodes: int
    cards: int


def zone_offers() -> dict[int, list[Offer]]:
    """chip id → the zones that offer it, Xinchuang zones first. Two queries whatever the catalog's size."""
    zones = {z.pk: z for z in Zone.objects.active().select_related("region")}
    rows = (
        Node.objects.schedulable()
        .values("zone_id", "chip_id")
        .annotate(node_count=Count("id"), card_count=Sum("cards"))
        .order_by()
    )
    offers: dict[int, list[Offer]] = {}
    for row in rows:
        zone = zones.get(row["zone_id"])
        if zone is not None:
            offer = Offer(zone=zone, chip_id=row["chip_id"], nodes=row["node_count"], cards=row["card_count"])
            offers.setdefault(row["chip_id"], []).append(offer)
    for chip_offers in offers.values():
        chip_offers.sort(key=lambda o: (not o.zone.xinchuang, o.zone.sort_order, o.zone.slug))
    return offers
