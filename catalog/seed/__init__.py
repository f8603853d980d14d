"""Load the catalog file (catalog.toml beside this module) into the database, idempotently.

Rows are created when missing and otherwise left as staff edited them; ``update=True`` refreshes chip figures
and names from the file (prices and subsidies live in billing/seed).
"""

import tomllib
from decimal import Decimal
from pathlib import Path

from django.db import transaction

from catalog.models import Chip, InstanceSpec, Node, Region, ScalingFigure, Zone

from ..choices import SPEC_CARD_COUNTS
from ..services import add_node

CATALOG_FILE = Path(__file__).with_name("catalog.toml")

CHIP_FIGURES = (
    "memory_bandwidth_tbs",
    "tflops_bf16",
    "tflops_fp16",
    "measured_tflops_bf16",
    "measured_tflops_fp16",
    "mfu",
)
CHIP_FIELDS = ("vendor", "name", "name_zh", "backend", "xinchuang", "memory_gb", "memory_type", "interconnect")
CHIP_FIELDS += ("interconnect_gbs", "glm70b_tokens_per_s", "software", "note")


def read(path: Path = CATALOG_FILE) -> dict:
    with path.open("rb") as fh:
        return tomllib.load(fh)


def _chip_defaults(entry: dict, order: int) -> dict:
    defaults = {name: entry[name] for name in CHIP_FIELDS if name in entry}
    defaults |= {name: Decimal(entry[name]) for name in CHIP_FIGURES if name in entry}
    defaults["rentable"] = entry.get("rentable", True)
    defaults["sort_order"] = order
    if resnet := entry.get("resnet50"):
        defaults |= {
            "resnet50_precision": resnet["precision"],
            "resnet50_images_per_s": resnet["images_per_s"],
            "resnet50_latency_ms": Decimal(resnet["latency_ms"]),
            "resnet50_demo_price_per_hour": Decimal(resnet["price_per_hour"]),
        }
    return defaults


def _load_chips(entries, update: bool, counts: dict) -> dict[str, Chip]:
    chips = {}
    for order, entry in enumerate(entries, start=1):
        defaults = _chip_defaults(entry, order)
        if update:
            chip, created = Chip.objects.update_or_create(slug=entry["slug"], defaults=defaults)
        else:
            chip, created = Chip.objects.get_or_create(slug=entry["slug"], defaults=defaults)
        counts["chips"] += created
        for cards, efficiency in entry.get("scaling_efficiency", {}).items():
            lookup = {"chip": chip, "cards": int(cards)}
            if update:
                ScalingFigure.objects.update_or_create(**lookup, defaults={"efficiency": Decimal(efficiency)})
            else:
                ScalingFigure.objects.get_or_create(**lookup, defaults={"efficiency": Decimal(efficiency)})
        chips[chip.slug] = chip
    return chips


def _load_places(data, counts) -> dict[str, Zone]:
    regions = {}
    for order, entry in enumerate(data.get("region", []), start=1):
        defaults = {"name": entry["name"], "name_zh": entry.get("name_zh", ""), "sort_order": order}
        regions[entry["slug"]], created = Region.objects.get_or_create(slug=entry["slug"], defaults=defaults)
        counts["regions"] += created
    zones = {}
    for entry in data.get("zone", []):
        defaults = {
            "region": regions[entry["region"]],
            "name": entry["name"],
            "name_zh": entry.get("name_zh", ""),
            "xinchuang": entry.get("xinchuang", False),
            "sort_order": entry.get("sort_order", 0),
        }
        zones[entry["slug"]], created = Zone.objects.get_or_create(slug=entry["slug"], defaults=defaults)
        counts["zones"] += created
    return zones


def _load_nodes(entries, zones, chips, counts) -> None:
    for entry in entries:
        zone, chip = zones[entry["zone"]], chips[entry["chip"]]
        for n in range(1, entry["count"] + 1):
            name = f"{entry['prefix']}-{n:02d}"
            if not Node.objects.filter(zone=zone, name=name).exists():
                add_node(zone=zone, chip=chip, name=name, cards=entry["cards"])
                counts["nodes"] += 1


def _load_specs(sizing, chips, counts) -> None:
    for chip in chips.values():
        if not chip.rentable:
            continue
        for cards in sizing.get("cards", SPEC_CARD_COUNTS):
            defaults = {
                "slug": f"{chip.slug}-x{cards}",
                "vcpus": sizing["vcpus_per_card"] * cards,
                "memory_gb": sizing["memory_gb_per_card"] * cards,
                "system_disk_gb": sizing["system_disk_gb_per_card"] * cards,
            }
            _spec, created = InstanceSpec.objects.get_or_create(chip=chip, cards=cards, defaults=defaults)
            counts["specs"] += created
    if no_card := sizing.get("no_card"):
        defaults = {k: no_card[k] for k in ("slug", "vcpus", "memory_gb", "system_disk_gb")}
        _spec, created = InstanceSpec.objects.get_or_create(chip=None, cards=0, defaults=defaults)
        counts["specs"] += created


@transaction.atomic
def load(data: dict | None = None, *, update: bool = False) -> dict[str, int]:
    """Seed regions, zones, chips, nodes and specs; return how many rows of each were created."""
    data = read() if data is None else data
    counts = dict.fromkeys(("regions", "zones", "chips", "nodes", "specs"), 0)
    zones = _load_places(data, counts)
    chips = _load_chips(data.get("chip", []), update, counts)
    _load_nodes(data.get("nodes", []), zones, chips, counts)
    _load_specs(data.get("specs", {}), chips, counts)
    return counts
