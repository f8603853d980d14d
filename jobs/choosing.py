"""Where a job runs: the family it names, or for ``auto`` the chip that is cheapest per unit of work.

``auto`` compares, among the families the job's image has a variant for, every chip on offer whose price for the
job's cards is within the job's hourly ceiling, by the price of the work rather than of the hour: the payable price
per card-hour divided by the chip's published ResNet-50 throughput (the chip comparison's cost per 10 M images,
``billing.comparison``), so a slower chip that is cheaper per hour can still lose. Chips without a published
throughput are not compared.
"""

from dataclasses import dataclass
from decimal import Decimal

from django.utils.translation import gettext as _

from billing.comparison import cost_per_10m_images
from billing.display import format_cny_rate
from billing.quote import Quote
from catalog.models import Chip
from core.errors import ServiceError
from core.field_errors import FieldError
from instances import images, launching

from .choices import JobBackend

CHIP_FAMILIES = (JobBackend.NPU, JobBackend.MLU, JobBackend.DCU, JobBackend.CUDA)


@dataclass(frozen=True)
class Choice:
    """Where a job runs: ``chip`` (None on the CPU, or for a named family whose cheapest chip the launch picks),
    the image variant for that family, the quote of one hour, and the figures behind the choice."""

    family: str
    chip: Chip | None
    image: str
    quote: Quote
    figures: dict


def choose(user, *, backend: str, image: str, cards: int, ceiling: Decimal | None, spot: bool) -> Choice:
    """The place a job runs, or ServiceError saying why none fits (a FieldError naming the field)."""
    if backend == JobBackend.AUTO:
        return _cheapest_per_work(user, image, cards, ceiling, spot)
    if backend == JobBackend.CPU:
        request = launching.LaunchRequest(name="job", image=image, no_card=True, spot=spot)
        q = launching.preview(user, request)
        figures = {"rule": "cpu", "price": str(q.payable_per_hour)}
        return _within(Choice("cpu", None, image, q, figures), ceiling)
    # A multi-arch image is named by any of its variants: the job boots the one for the family it asked for.
    image = variants_by_family(user, image).get(backend, image)
    request = launching.LaunchRequest(name="job", image=image, backend=backend, cards=cards, spot=spot)
    q = launching.preview(user, request)
    chip = Chip.objects.get(slug=q.chip_slug)
    figures = {"rule": "family", "chip": chip.label, "price": str(q.payable_per_hour)}
    return _within(Choice(backend, chip, image, q, figures), ceiling)


def _within(choice: Choice, ceiling: Decimal | None) -> Choice:
    if ceiling is not None and choice.quote.payable_per_hour > ceiling:
        raise FieldError(
            "max_price_per_hour",
            _("The cheapest machine for this job costs %(price)s an hour, above your ceiling of %(ceiling)s.")
            % {"price": format_cny_rate(choice.quote.payable_per_hour), "ceiling": format_cny_rate(ceiling)},
            code="above_ceiling",
        )
    return choice


def variants_by_family(user, image: str) -> dict[str, str]:
    """family → the slug of ``image``'s variant for it, for every chip family the image has a variant for."""
    base = images.get_image(image, None, user)
    found = {}
    for family in CHIP_FAMILIES:
        for variant in images.compatible_images(family, user):
            if variant.image_id == base.image_id:
                found[family] = variant.slug
    return found


def _cheapest_per_work(user, image: str, cards: int, ceiling: Decimal | None, spot: bool) -> Choice:
    variants = variants_by_family(user, image)
    offers = []
    for chip in Chip.objects.offered().filter(backend__in=variants, resnet50_images_per_s__isnull=False):
        request = launching.LaunchRequest(
            name="job", image=variants[chip.backend], chip=chip.slug, cards=cards, spot=spot
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
    return Choice(chip.backend, chip, variants[chip.backend], q, figures)
