"""The training estimator (参数适配三维模型): model size, tokens, deadline and budget → cards, days and cost per chip.

Compute: training takes 6·N·D floating-point operations (N parameters, D tokens). A run on c cards lasts
6·N·D / (c × peak × MFU × scaling efficiency(c)) seconds, with the chip's published peak BF16 TFLOPS, its
published MFU (LLaMA3-70B training) and its published scaling efficiency. Memory: training state takes
``BYTES_PER_PARAMETER`` bytes per parameter, sharded evenly over the cards. Costs come from the quote function.

A chip without a needed published figure is reported as such, never estimated.
"""

import math
from dataclasses import dataclass, field
from decimal import ROUND_HALF_UP, Decimal

from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from billing.quote import MAX_CARDS, MAX_TERM_MINUTES, PriceBook, Quote, load_price_book, quote
from catalog.choices import SPEC_CARD_COUNTS
from catalog.models import Chip
from core.errors import ServiceError
from core.field_errors import FieldError

# Mixed-precision training with Adam: BF16 weights and gradients (2 + 2 bytes) plus FP32 master weights and
# the two Adam moments (4 + 4 + 4 bytes). Activations and framework overhead come on top, so the card count
# for memory is a floor.
BYTES_PER_PARAMETER = 16
FLOPS_PER_PARAMETER_TOKEN = 6
GIB = 2**30
BILLION = Decimal(10) ** 9
SECONDS_PER_DAY = 86_400
CARDS_PER_NODE = 8

MAX_PARAMS_B = Decimal(10_000)  # 10 T parameters
MAX_TOKENS_B = Decimal(1_000_000)  # 1,000 T tokens
MAX_DEADLINE_DAYS = Decimal(3650)
MAX_BUDGET_CNY = Decimal(10) ** 12

LIMITS = {
    "params_b": MAX_PARAMS_B,
    "tokens_b": MAX_TOKENS_B,
    "deadline_days": MAX_DEADLINE_DAYS,
    "budget_cny": MAX_BUDGET_CNY,
}
FIELD_LABELS = {
    "params_b": gettext_lazy("Model parameters (billions)"),
    "tokens_b": gettext_lazy("Training tokens (billions)"),
    "deadline_days": gettext_lazy("Deadline (days)"),
    "budget_cny": gettext_lazy("Budget (CNY)"),
}


@dataclass(frozen=True)
class TrainingJob:
    """What to train: parameters and tokens in billions; optional deadline (days) and budget (CNY)."""

    params_b: Decimal
    tokens_b: Decimal
    deadline_days: Decimal | None = None
    budget_cny: Decimal | None = None

    def __post_init__(self):
        for name, limit in LIMITS.items():
            value = getattr(self, name)
            if value is None and name in ("deadline_days", "budget_cny"):
                continue
            check_positive(name, value, limit)

    @property
    def flops(self) -> Decimal:
        return FLOPS_PER_PARAMETER_TOKEN * self.params_b * BILLION * self.tokens_b * BILLION

    @property
    def state_bytes(self) -> Decimal:
        return self.params_b * BILLION * BYTES_PER_PARAMETER


def check_positive(name: str, value, limit: Decimal) -> None:
    """Refuse a missing, non-numeric, zero, negative or absurdly large input with a message naming it."""
    label = FIELD_LABELS[name]
    if not isinstance(value, Decimal) or not value.is_finite():
        raise FieldError(name, _("%(field)s must be a number.") % {"field": label}, code="invalid_input")
    if value <= 0:
        raise FieldError(name, _("%(field)s must be greater than zero.") % {"field": label}, code="invalid_input")
    if value > limit:
        message = _("%(field)s can be at most %(limit)s.") % {"field": label, "limit": f"{limit:,}"}
        raise FieldError(name, message, code="invalid_input")


def round_cards(n: int) -> int:
    """Cards come as a spec of 1, 2, 4 or 8 on one node, or whole 8-card nodes beyond that."""
    for size in SPEC_CARD_COUNTS:
        if n <= size:
            return size
    return math.ceil(n / CARDS_PER_NODE) * CARDS_PER_NODE


def scaling_efficiency(chip: Chip, cards: int) -> tuple[Decimal | None, int | None]:
    """(efficiency, the cluster size it was published for) for ``cards`` cards.

    One card scales perfectly. Otherwise the published figure for the smallest published cluster at least
    this large; beyond the largest published cluster, that cluster's figure (the page says so). None when the
    operator published no scaling figure for the chip.
    """
    if cards == 1:
        return Decimal(1), None
    figures = sorted(chip.scaling_figures.all(), key=lambda f: f.cards)
    if not figures:
        return None, None
    chosen = next((f for f in figures if f.cards >= cards), figures[-1])
    return chosen.efficiency, chosen.cards


@dataclass(frozen=True)
class ChipEstimate:
    chip: Chip
    min_cards_for_memory: int | None
    missing: tuple[str, ...] = ()
    cards_for_deadline: int | None = None
    cards: int | None = None
    fits_memory: bool | None = None
    scaling_efficiency: Decimal | None = None
    scaling_published_for: int | None = None
    days: Decimal | None = None
    card_hours: Decimal | None = None
    quote: Quote | None = None
    fits_deadline: bool | None = None
    fits_budget: bool | None = None
    problem: str = ""

    @property
    def cost(self) -> Decimal | None:
        return self.quote.payable_total if self.quote else None

    @property
    def estimable(self) -> bool:
        return not self.missing

    @property
    def mfu(self) -> Decimal | None:
        return self.chip.mfu

    @property
    def peak_tflops(self) -> Decimal | None:
        return self.chip.tflops_bf16

    @property
    def extrapolated(self) -> bool:
        return bool(self.cards and self.scaling_published_for and self.cards > self.scaling_published_for)

    @property
    def acceptable(self) -> bool:
        return self.cost is not None and self.fits_deadline is not False and self.fits_budget is not False


@dataclass(frozen=True)
class Estimate:
    job: TrainingJob
    rows: tuple[ChipEstimate, ...]
    recommended: ChipEstimate | None
    assumptions: dict = field(default_factory=dict)


def assumptions() -> dict:
    return {
        "flops_per_parameter_token": FLOPS_PER_PARAMETER_TOKEN,
        "bytes_per_parameter": BYTES_PER_PARAMETER,
        "memory_unit_bytes": GIB,
        "peak": "theoretical BF16 TFLOPS as published",
        "mfu": "published MFU of LLaMA3-70B training",
        "scaling_efficiency": "1 for one card; else the published figure for the smallest published cluster "
        "at least as large, or the largest published cluster's figure beyond it",
        "cards": "rounded up to 1, 2, 4 or 8 cards, or whole 8-card nodes",
        "cost": "the cheapest plan without spot, after subsidies, from the quote function",
        "activations": "activation memory and framework overhead are not included",
    }


def _missing_figures(chip: Chip) -> tuple[str, ...]:
    missing = []
    if chip.tflops_bf16 is None:
        missing.append(_("peak BF16 TFLOPS"))
    if chip.mfu is None:
        missing.append(_("MFU"))
    if chip.memory_gb is None:
        missing.append(_("memory"))
    return tuple(missing)


def _days(job: TrainingJob, chip: Chip, cards: int) -> Decimal | None:
    efficiency, _size = scaling_efficiency(chip, cards)
    if efficiency is None or efficiency <= 0 or not chip.mfu:
        return None
    flop_rate = cards * chip.tflops_bf16 * Decimal(10) ** 12 * chip.mfu * efficiency
    return job.flops / flop_rate / SECONDS_PER_DAY


def _cards_for_deadline(job: TrainingJob, chip: Chip) -> int | None:
    """The fewest cards (rounded as specs come) that finish by the deadline; None if not possible."""
    ideal = job.flops / (chip.tflops_bf16 * Decimal(10) ** 12 * chip.mfu * job.deadline_days * SECONDS_PER_DAY)
    if ideal > MAX_CARDS:
        return None
    cards = round_cards(max(1, math.ceil(ideal)))
    # Scaling efficiency falls as clusters grow, so a few steps up settle it.
    for _step in range(64):
        days = _days(job, chip, cards)
        if days is None:
            return None
        if days <= job.deadline_days:
            return cards
        efficiency, _size = scaling_efficiency(chip, cards)
        cards = round_cards(max(cards + 1, math.ceil(ideal / efficiency)))
        if cards > MAX_CARDS:
            return None
    return None


def _cheapest_quote(chip, cards, days, book) -> tuple[Quote | None, str]:
    minutes = math.ceil(days * 1440)
    if minutes > MAX_TERM_MINUTES:
        return None, _("The run would take more than ten years.")
    quotes, problem = [], ""
    for plan in book.plans.values():
        try:
            quotes.append(quote(chip=chip, cards=cards, plan=plan, minutes=minutes, book=book))
        except ServiceError as exc:
            problem = str(exc.message)
    if not quotes:
        return None, problem
    return min(quotes, key=lambda q: q.payable_total), ""


def estimate_chip(job: TrainingJob, chip: Chip, *, cards: int | None = None, book: PriceBook) -> ChipEstimate:
    """The estimate for one chip; ``cards`` fixes the card count, otherwise the estimator picks it."""
    if cards is not None and (isinstance(cards, bool) or not isinstance(cards, int) or not 1 <= cards <= MAX_CARDS):
        raise FieldError(
            "cards",
            _("The number of cards must be a whole number from 1 to %(max)s.") % {"max": f"{MAX_CARDS:,}"},
            code="invalid_cards",
        )
    min_cards = math.ceil(job.state_bytes / (chip.memory_gb * GIB)) if chip.memory_gb else None
    missing = _missing_figures(chip)
    if missing:
        return ChipEstimate(chip=chip, min_cards_for_memory=min_cards, missing=missing)
    if min_cards > MAX_CARDS:
        return ChipEstimate(chip=chip, min_cards_for_memory=min_cards, problem=_("The model needs too many cards."))
    for_deadline = _cards_for_deadline(job, chip) if job.deadline_days else None
    if cards is None:
        wanted = max(min_cards, for_deadline or 1)
        cards = round_cards(wanted) if wanted <= MAX_CARDS else MAX_CARDS
    days = _days(job, chip, cards)
    efficiency, published_for = scaling_efficiency(chip, cards)
    if days is None:
        return ChipEstimate(chip=chip, min_cards_for_memory=min_cards, missing=(_("scaling efficiency"),), cards=cards)
    priced, problem = _cheapest_quote(chip, cards, days, book)
    return ChipEstimate(
        chip=chip,
        min_cards_for_memory=min_cards,
        cards_for_deadline=for_deadline,
        cards=cards,
        fits_memory=cards >= min_cards,
        scaling_efficiency=efficiency,
        scaling_published_for=published_for,
        days=days.quantize(Decimal("0.01"), rounding=ROUND_HALF_UP),
        card_hours=(days * 24 * cards).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP),
        quote=priced,
        fits_deadline=None if job.deadline_days is None else days <= job.deadline_days,
        fits_budget=None if job.budget_cny is None or priced is None else priced.payable_total <= job.budget_cny,
        problem=problem,
    )


def estimate_training(
    job: TrainingJob, *, chips=None, cards: int | None = None, user=None, book: PriceBook | None = None
) -> Estimate:
    """Estimate ``job`` on every chip offered, rentable and priced (or ``chips``, on ``cards`` cards if given),
    and recommend the cheapest that fits."""
    book = book or load_price_book(user=user)
    chips = chips if chips is not None else Chip.objects.offered().with_figures()
    rows = tuple(estimate_chip(job, chip, cards=cards, book=book) for chip in chips)
    fitting = [row for row in rows if row.acceptable]
    recommended = min(fitting, key=lambda r: (r.cost, r.days), default=None)
    return Estimate(job=job, rows=rows, recommended=recommended, assumptions=assumptions())
