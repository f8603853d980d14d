"""Load prices, plans and subsidy programmes (pricing.toml beside this module), idempotently.

A price row is created only if the chip has no row at the file's ``effective_from``: loading never rewrites a
price, and staff's later prices stay in force. Plans and programmes are created when missing, never overwritten.
"""

import tomllib
from datetime import datetime
from decimal import Decimal
from pathlib import Path

from django.db import transaction

from catalog.models import Chip, Zone

from ..models import Plan, Price, StoragePrice, SubsidyProgramme

PRICING_FILE = Path(__file__).with_name("pricing.toml")


def read(path: Path = PRICING_FILE) -> dict:
    with path.open("rb") as fh:
        return tomllib.load(fh)


def _moment(value) -> datetime:
    return value if isinstance(value, datetime) else datetime.fromisoformat(value)


def _load_prices(data, counts) -> None:
    effective_from = _moment(data["effective_from"])
    chips = {c.slug: c for c in Chip.objects.filter(slug__in=data.get("prices", {}))}
    for slug, per_hour in data.get("prices", {}).items():
        _price, created = Price.objects.get_or_create(
            chip=chips[slug], effective_from=effective_from, defaults={"per_hour": Decimal(per_hour)}
        )
        counts["prices"] += created
    if no_card := data.get("no_card"):
        _price, created = Price.objects.get_or_create(
            chip=None, effective_from=effective_from, defaults={"per_hour": Decimal(no_card["per_hour"])}
        )
        counts["prices"] += created
    for resource, per_gb_day in data.get("storage_prices", {}).items():
        _price, created = StoragePrice.objects.get_or_create(
            resource=resource, effective_from=effective_from, defaults={"per_gb_day": Decimal(per_gb_day)}
        )
        counts["prices"] += created


def _load_plans(entries, counts) -> None:
    for entry in entries:
        defaults = {
            "name": entry["name"],
            "name_zh": entry.get("name_zh", ""),
            "factor": Decimal(entry["factor"]),
            "period_minutes": entry["period_minutes"],
            "spot_factor": Decimal(entry["spot_factor"]) if "spot_factor" in entry else None,
            "sort_order": entry.get("sort_order", 0),
        }
        _plan, created = Plan.objects.get_or_create(slug=entry["slug"], defaults=defaults)
        counts["plans"] += created


def _load_subsidies(entries, counts) -> None:
    for entry in entries:
        defaults = {
            "name": entry["name"],
            "name_zh": entry.get("name_zh", ""),
            "rate": Decimal(entry["rate"]),
            "starts_at": _moment(entry["starts_at"]),
            "ends_at": _moment(entry["ends_at"]) if "ends_at" in entry else None,
            "budget": Decimal(entry["budget"]) if "budget" in entry else None,
            "monthly_cap_per_user": Decimal(entry["monthly_cap_per_user"]) if "monthly_cap_per_user" in entry else None,
            "eligibility": entry.get("eligibility", "everyone"),
        }
        programme, created = SubsidyProgramme.objects.get_or_create(slug=entry["slug"], defaults=defaults)
        if created:
            programme.chips.set(Chip.objects.filter(slug__in=entry.get("chips", [])))
            programme.zones.set(Zone.objects.filter(slug__in=entry.get("zones", [])))
        counts["subsidies"] += created


@transaction.atomic
def load(data: dict | None = None) -> dict[str, int]:
    """Seed prices, plans and subsidy programmes; return how many rows of each were created."""
    data = read() if data is None else data
    counts = dict.fromkeys(("prices", "plans", "subsidies"), 0)
    _load_prices(data, counts)
    _load_plans(data.get("plan", []), counts)
    _load_subsidies(data.get("subsidy", []), counts)
    return counts
