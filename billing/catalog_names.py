"""The names people read for the chip, zone and plan slugs that usage sessions and reports keep.

Sessions and the ledger store slugs ("ascend-910b", "cn-east-xc", "payg") so history survives renames; a page
shows the catalog's name in the reader's language instead. A slug no longer in the catalog is shown as it is.

The catalog's names are read once per price version and kept in the process: saving a chip, zone or plan changes
the version (``billing.price_version``), so a rename shows on the next page, and a page pays one query by primary
key for all three kinds.
"""

import threading
from collections.abc import Iterable

from catalog.models import Chip, Zone

from . import price_version
from .models import Plan

_kept: dict = {}
_lock = threading.Lock()


def _catalog() -> dict[type, dict[str, object]]:
    """slug → the row (its names only) of every chip, zone and plan, as of the price version now."""
    version = price_version.current()
    kept = _kept.get("names")
    if kept is not None and kept[0] == version:
        return kept[1]
    names = {
        model: {item.slug: item for item in model.objects.only("slug", "name", "name_zh").order_by()}
        for model in (Chip, Zone, Plan)
    }
    with _lock:
        _kept["names"] = (version, names)
    return names


def _names(rows: dict[str, object], slugs: Iterable[str]) -> dict[str, str]:
    return {slug: rows[slug].label for slug in {slug for slug in slugs if slug} if slug in rows}


def names(chips: Iterable[str] = (), zones: Iterable[str] = (), plans: Iterable[str] = ()):
    """(chip names, zone names, plan names) for these slugs, in the active language, from one look at the price
    version: a page that names all three pays one query."""
    catalog = _catalog()
    return _names(catalog[Chip], chips), _names(catalog[Zone], zones), _names(catalog[Plan], plans)


def chip_names(slugs: Iterable[str]) -> dict[str, str]:
    """slug → the chip's name in the active language, e.g. 'ascend-910b' → '昇腾 910B'."""
    return names(chips=slugs)[0]


def zone_names(slugs: Iterable[str]) -> dict[str, str]:
    return names(zones=slugs)[1]


def plan_names(slugs: Iterable[str]) -> dict[str, str]:
    return names(plans=slugs)[2]


def forget() -> None:
    """Drop the kept names (tests that roll back the rows behind a version)."""
    with _lock:
        _kept.clear()
