"""``auto``: the chip that is cheapest per unit of work, for a job or an instance launch alike.

Among the families the image has a variant for, every chip on offer whose price for the cards is within the hourly
ceiling (if any) is compared by the price of the work rather than of the hour: the payable price per card-hour
divided by the chip's published ResNet-50 throughput (the chip comparison's cost per 10 M images,
``billing.comparison``), so a slower chip that is cheaper per hour can still lose. Chips without a published
throughput are not compared. The figures behind the choice are kept as figures, so each reader sees the reason in
their own language (:func:`reason`).
"""

import dataclasses
from dataclasses import dataclass
from decimal import Decimal

from django.db.models import Max
from django.utils.translation import gettext as _

from billing.comparison import cost_per_10m_images
from billing.display import format_cny, format_cny_rate
from billing.quote import Quote
from catalog.choices import Backend
from catalog.models import Chip, Node
from core.errors import ServiceError
from core.field_errors import FieldError

from . import images, launching

AUTO = "auto"
CHIP_FAMILIES = (Backend.NPU, Backend.MLU, Backend.DCU, Backend.CUDA)


@dataclass(frozen=True)
class Cheapest:
    """The chip picked, the image variant for its family, its quote for one hour, and the figures behind it."""

    chip: Chip
    image: str
    quote: Quote
    figures: dict


def variants_by_family(user, image: str) -> dict[str, str]:
    """family → the slug of ``image``'s variant for it, for every chip family the image has a variant for."""
    base = images.get_image(image, None, user)
    found = {}
    for family in CHIP_FAMILIES:
        for variant in images.compatible_images(family, user):
            if variant.image_id == base.image_id:
                found[family] = variant.slug
    return found


def cheapest_per_work(
    user, image: str, cards: int, ceiling: Decimal | None, spot: bool, plan: str = "payg"
) -> Cheapest:
    """The chip with the lowest price per unit of work, or a FieldError saying why none fits."""
    variants = variants_by_family(user, image)
    largest = dict(
        Node.objects.filter(zone__active=True)
        .values("chip_id")
        .annotate(most=Max("cards"))
        .values_list("chip_id", "most")
    )
    offers = []
    for chip in Chip.objects.offered().filter(backend__in=variants, resnet50_images_per_s__isnull=False):
        if largest.get(chip.pk, 0) < cards:
            continue  # no node holds that many of its cards together: it could never start there
        request = launching.LaunchRequest(
            name="auto", image=variants[chip.backend], chip=chip.slug, cards=cards, spot=spot, plan=plan
        )
        try:
            q = launching.preview(user, request)
        except ServiceError:
            continue  # not offered with this many cards, or in no zone: not a candidate
        if ceiling is None or q.payable_per_hour <= ceiling:
            offers.append((cost_per_10m_images(q, chip.resnet50_images_per_s), q.payable_per_hour, chip, q))
    if not offers:
        raise FieldError(
            "max_price_per_hour" if ceiling is not None else "backend",
            _("No chip family this image runs on has %(cards)s cards under your ceiling.") % {"cards": cards}
            if ceiling is not None
            else _("No chip family this image runs on is offered with %(cards)s cards.") % {"cards": cards},
            code="nothing_fits",
        )
    offers.sort(key=lambda offer: (offer[0], offer[1], offer[2].slug))
    cost, _price, chip, q = offers[0]
    figures = {
        "rule": "cheapest_per_work",
        "chip": chip.label,
        "price": str(q.payable_per_card_hour),
        "images_per_s": chip.resnet50_images_per_s,
        "cost_per_10m_images": str(cost),
        "families": len({offer[2].backend for offer in offers}),
        "ceiling": str(ceiling) if ceiling is not None else "",
    }
    return Cheapest(chip, variants[chip.backend], q, figures)


def resolve(user, request: launching.LaunchRequest) -> launching.LaunchRequest:
    """A launch request with ``backend="auto"`` made concrete: the chip cheapest per unit of work and its image
    variant, with the figures behind the choice kept on the request (and then on the instance). Any other request
    is returned as it is."""
    if request.backend != AUTO:
        return request
    if request.no_card or request.chip:
        raise FieldError(
            "backend", _("“auto” picks the chip: leave the chip and no-card mode empty."), code="invalid_chip"
        )
    found = cheapest_per_work(user, request.image, request.cards, None, request.spot, request.plan)
    return dataclasses.replace(request, backend="", chip=found.chip.slug, image=found.image, choice=found.figures)


def reason(figures: dict) -> str:
    """Why the chip of a ``cheapest_per_work`` choice was picked, in the active language."""
    c = figures
    values = {
        "chip": c["chip"],
        "price": format_cny_rate(c["price"]),
        "ips": f"{c['images_per_s']:,}",
        "cost": format_cny(c["cost_per_10m_images"]),
        "count": c["families"],
        "ceiling": format_cny_rate(c["ceiling"]) if c.get("ceiling") else "",
    }
    if c.get("ceiling"):
        return (
            _(
                "%(chip)s: %(price)s/h at %(ips)s img/s — %(cost)s per 10 M images, the cheapest of %(count)s "
                "families under your %(ceiling)s/h ceiling."
            )
            % values
        )
    return (
        _("%(chip)s: %(price)s/h at %(ips)s img/s — %(cost)s per 10 M images, the cheapest of %(count)s families.")
        % values
    )
