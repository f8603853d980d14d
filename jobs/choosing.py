"""Where a job runs: the family it names, or for ``auto`` the chip that is cheapest per unit of work under the
job's hourly ceiling — the rule an instance launch with ``auto`` uses too (``instances.choosing``)."""

from dataclasses import dataclass
from decimal import Decimal

from django.utils.translation import gettext as _

from billing.display import format_cny_rate
from billing.quote import Quote
from catalog.models import Chip
from core.field_errors import FieldError
from instances import choosing as auto
from instances import launching

from .choices import JobBackend


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
    return auto.variants_by_family(user, image)


def _cheapest_per_work(user, image: str, cards: int, ceiling: Decimal | None, spot: bool) -> Choice:
    found = auto.cheapest_per_work(user, image, cards, ceiling, spot)
    return Choice(found.chip.backend, found.chip, found.image, found.quote, found.figures)
