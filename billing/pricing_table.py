"""What the pricing page shows, computed with the quote function from one price book."""

from dataclasses import dataclass

from catalog.models import Chip, InstanceSpec
from core.errors import ServiceError

from .quote import PAY_AS_YOU_GO, PriceBook, Quote, quote

DAY_MINUTES = 1440
MONTH_MINUTES = 43200


@dataclass(frozen=True)
class PriceRow:
    """One chip's prices for one card: per hour pay-as-you-go and spot, per day and per 30-day month."""

    chip: Chip | None
    hourly: Quote | None
    spot: Quote | None
    daily: Quote | None
    monthly: Quote | None

    @property
    def published(self) -> bool:
        return self.hourly is not None


def _try(**kwargs) -> Quote | None:
    try:
        return quote(**kwargs)
    except ServiceError:
        return None


def price_row(book: PriceBook, chip: Chip | None) -> PriceRow:
    cards = 1 if chip else 0
    plans = book.plans
    return PriceRow(
        chip=chip,
        hourly=_try(chip=chip, cards=cards, book=book),
        spot=_try(chip=chip, cards=cards, spot=True, book=book),
        daily=_try(chip=chip, cards=cards, plan="daily", minutes=DAY_MINUTES, book=book) if "daily" in plans else None,
        monthly=_try(chip=chip, cards=cards, plan="monthly", minutes=MONTH_MINUTES, book=book)
        if "monthly" in plans
        else None,
    )


def price_table(book: PriceBook, chips) -> list[PriceRow]:
    """A row per rentable chip, then the no-card mode; a chip without a price has empty quotes."""
    return [price_row(book, chip) for chip in chips] + [price_row(book, None)]


@dataclass(frozen=True)
class SpecPrice:
    spec: InstanceSpec
    hourly: Quote | None


def spec_prices(book: PriceBook, specs) -> list[SpecPrice]:
    return [SpecPrice(spec, _try(spec=spec, plan=PAY_AS_YOU_GO, book=book)) for spec in specs]


def quote_or_error(**kwargs) -> tuple[Quote | None, str]:
    """A quote, or the message explaining why there is none."""
    try:
        return quote(**kwargs), ""
    except ServiceError as exc:
        return None, str(exc.message)
