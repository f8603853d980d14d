"""The chip comparison: one chart and one plain table per figure, from published figures and the quote function.

Chart values travel as decimal strings (the page's script only plots them); a chip without a published figure
is left out of that chart and shown as "not published" in the table. The price and cost charts compare what can
be bought: a chip that is not for sale (a reference chip, or one without a published price) is left out of them,
and the other charts mark a reference chip "not for sale".
"""

from dataclasses import dataclass, field
from decimal import ROUND_HALF_UP, Decimal

from django.utils.translation import gettext as _

from billing.display import format_cny, format_cny_rate
from billing.money import to_cents
from billing.pricing_table import price_row
from billing.quote import PriceBook, Quote

TOKENS_PER_COST_UNIT = Decimal(10) ** 8  # cost per 100 M tokens
# Per 10 million images, to the fen: per 1,000 images the domestic chips all cost about ¥0.0001 and drew
# equal bars; per 10 M they read ¥0.71, ¥0.84, ¥1.30 — different bars, and the table's figures agree.
IMAGES_PER_COST_UNIT = Decimal(10) ** 7
PRICE_CHARTS = ("price", "tokens", "images")
SECONDS_PER_HOUR = 3600
SCALING_SIZES_MAX = 4


@dataclass
class Chart:
    """A chart's data and the same numbers as a table (columns × one row per chip)."""

    slug: str
    title: str
    unit: str
    columns: list[str]
    rows: list[tuple[str, list[str | None]]] = field(default_factory=list)
    datasets: list[tuple[str, int]] = field(default_factory=list)  # (label, index of the column it plots)
    values: dict[int, list[str | None]] = field(default_factory=dict)
    note: str = ""

    @property
    def element_id(self) -> str:
        return f"chart-data-{self.slug}"

    def add(self, chip_label: str, cells: list[str | None], values: list[Decimal | None]) -> None:
        self.rows.append((chip_label, cells))
        for index, value in enumerate(values):
            self.values.setdefault(index, []).append(_num(value))

    def chart_data(self) -> dict:
        """What the page's script plots: chips with at least one value, one dataset per plotted column."""
        keep = [i for i, _row in enumerate(self.rows) if any(self.values[c][i] is not None for c in self.values)]
        return {
            "unit": self.unit,
            "labels": [self.rows[i][0] for i in keep],
            "datasets": [
                {"label": label, "data": [self.values[index][i] for i in keep]} for label, index in self.datasets
            ],
        }


def _num(value) -> str | None:
    if value is None:
        return None
    normal = Decimal(value).normalize()
    return f"{normal:f}"


def _pct(value) -> str | None:
    return None if value is None else f"{(value * 100).quantize(Decimal('0.1'), rounding=ROUND_HALF_UP)}%"


def _money(value) -> str | None:
    return None if value is None else format_cny(value)


def _rate(value) -> str | None:
    return None if value is None else format_cny_rate(value)


def cost_per_100m_tokens(price: Quote | None, tokens_per_s) -> Decimal | None:
    """Card-hours to process 100 M tokens at the published rate, times the payable price per card-hour."""
    if price is None or not tokens_per_s:
        return None
    return to_cents(price.payable_per_card_hour * TOKENS_PER_COST_UNIT / (tokens_per_s * SECONDS_PER_HOUR))


def cost_per_10m_images(price: Quote | None, images_per_s) -> Decimal | None:
    """Card-hours to classify 10 M images at the published rate, times the payable price per card-hour."""
    if price is None or not images_per_s:
        return None
    return to_cents(price.payable_per_card_hour * IMAGES_PER_COST_UNIT / (images_per_s * SECONDS_PER_HOUR))


def _charts() -> list[Chart]:
    return [
        Chart(
            "tflops",
            _("Theoretical vs measured TFLOPS"),
            "TFLOPS",
            [
                _("Theoretical BF16"),
                _("Measured BF16"),
                _("Theoretical FP16"),
                _("Measured FP16"),
                _("Measured / theoretical (BF16)"),
            ],
            datasets=[(_("Theoretical BF16"), 0), (_("Measured BF16"), 1)],
            note=_("Measured in LLaMA-7B training."),
        ),
        Chart(
            "bandwidth",
            _("Memory bandwidth"),
            "TB/s",
            [_("Memory (GB)"), _("Memory type"), _("Bandwidth (TB/s)")],
            datasets=[(_("Bandwidth (TB/s)"), 2)],
        ),
        Chart(
            "interconnect",
            _("Interconnect"),
            "GB/s",
            [_("Interconnect"), _("Per-card bandwidth (GB/s)")],
            datasets=[(_("Per-card bandwidth (GB/s)"), 1)],
        ),
        Chart(
            "scaling",
            _("Scaling efficiency"),
            "%",
            [_("Published figures")],
            note=_("Linear scaling efficiency = cluster throughput ÷ (one card's throughput × cards)."),
        ),
        Chart(
            "mfu",
            _("Model FLOPs utilisation (MFU)"),
            "%",
            [_("MFU, LLaMA3-70B training")],
            datasets=[(_("MFU, LLaMA3-70B training"), 0)],
        ),
        Chart(
            "price",
            _("Price per card-hour"),
            "CNY",
            [_("List price"), _("Pay-as-you-go after subsidy"), _("Spot after subsidy")],
            datasets=[(_("List price"), 0), (_("Pay-as-you-go after subsidy"), 1)],
        ),
        Chart(
            "tokens",
            _("Cost per 100 M tokens (GLM-70B training)"),
            "CNY",
            [_("Tokens/s"), _("Price per card-hour"), _("Cost per 100 M tokens")],
            datasets=[(_("Cost per 100 M tokens"), 2)],
            note=_(
                "From the published GLM-70B throughput (DP=128, TP=8), taken per card, at the "
                "pay-as-you-go price after subsidy."
            ),
        ),
        Chart(
            "images",
            _("Cost per 10 M images (ResNet-50 inference, batch 128)"),
            "CNY",
            [
                _("Precision"),
                _("Images/s"),
                _("Latency (ms)"),
                _("Demo price per hour (as published)"),
                _("Cost per 10 M images"),
            ],
            datasets=[(_("Cost per 10 M images"), 4)],
            note=_(
                "At today's pay-as-you-go price per card-hour after subsidy; the article's demo instance "
                "prices are shown for reference."
            ),
        ),
    ]


def _scaling_values(chip) -> tuple[list[str | None], list[Decimal | None]]:
    figures = sorted(chip.scaling_figures.all(), key=lambda f: f.cards)
    text = ", ".join(_("%(pct)s at %(cards)s cards") % {"pct": _pct(f.efficiency), "cards": f.cards} for f in figures)
    return [text or None], [figures[-1].efficiency * 100 if figures else None]


def comparison(chips, book: PriceBook) -> list[Chart]:
    """All charts for ``chips`` (prefetched with their scaling figures) priced from ``book``."""
    charts = {chart.slug: chart for chart in _charts()}
    for chip in chips:
        prices = price_row(book, chip) if chip.rentable else None
        hourly = prices.hourly if prices else None
        spot = prices.spot if prices else None
        label = chip.label if chip.rentable else _("%(chip)s (not for sale)") % {"chip": chip.label}
        ratio = chip.measured_ratio_bf16
        charts["tflops"].add(
            label,
            [
                _num(chip.tflops_bf16),
                _num(chip.measured_tflops_bf16),
                _num(chip.tflops_fp16),
                _num(chip.measured_tflops_fp16),
                _pct(ratio),
            ],
            [chip.tflops_bf16, chip.measured_tflops_bf16, None, None, None],
        )
        charts["bandwidth"].add(
            label,
            [_num(chip.memory_gb), chip.memory_type or None, _num(chip.memory_bandwidth_tbs)],
            [None, None, chip.memory_bandwidth_tbs],
        )
        charts["interconnect"].add(
            label, [chip.interconnect or None, _num(chip.interconnect_gbs)], [None, chip.interconnect_gbs]
        )
        cells, values = _scaling_values(chip)
        charts["scaling"].add(label, cells, values)
        charts["mfu"].add(label, [_pct(chip.mfu)], [chip.mfu * 100 if chip.mfu is not None else None])
        if hourly is not None:
            _add_prices(charts, chip, label, hourly, spot)
    charts["scaling"].datasets = [(_("Efficiency at the largest published cluster (%)"), 0)]
    for slug in PRICE_CHARTS:
        charts[slug].note = " ".join(filter(None, [charts[slug].note, _("Only chips on sale are compared.")]))
    return list(charts.values())


def _add_prices(charts: dict[str, Chart], chip, label: str, hourly: Quote, spot: Quote | None) -> None:
    """The price and cost rows of a chip on sale; the chart plots the same fen amounts the table shows."""
    list_price, payable = to_cents(hourly.list_per_card_hour), to_cents(hourly.payable_per_card_hour)
    charts["price"].add(
        label,
        [
            _rate(hourly.list_per_card_hour),
            _rate(hourly.payable_per_card_hour),
            _rate(spot.payable_per_card_hour if spot else None),
        ],
        [list_price, payable, None],
    )
    tokens = cost_per_100m_tokens(hourly, chip.glm70b_tokens_per_s)
    charts["tokens"].add(
        label,
        [_num(chip.glm70b_tokens_per_s), _rate(hourly.payable_per_card_hour), _money(tokens)],
        [None, None, tokens],
    )
    images = cost_per_10m_images(hourly, chip.resnet50_images_per_s)
    charts["images"].add(
        label,
        [
            chip.resnet50_precision.upper() or None,
            _num(chip.resnet50_images_per_s),
            _num(chip.resnet50_latency_ms),
            _rate(chip.resnet50_demo_price_per_hour),
            _money(images),
        ],
        [None, None, None, None, images],
    )
