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
    names = {model: {item.slug: item for item in model.objects.only("slug", "name", "name_zh").order_by()}
             for model in (Chip, Zone, Plan)}  # fmt: skip
    with _lock:
        _kept["names"] = (version, names)
    return names


def _names(model, slugs: Iterable[str]) -> dict[str, str]:
    wanted = {slug for slug in slugs if slug}
    if not wanted:
        return {}
    rows = _catalog()[model]
    return {slug: rows[slug].label for slug in wanted if slug in rows}


def chip_names(slugs: Iterable[str]) -> dict[str, str]:
    """slug → the chip's name in the active language, e.g. 'ascend-910b' → '昇腾 910B'."""
    return _names(Chip, slugs)


def zone_names(slugs: Iterable[str]) -> dict[str, str]:
    return _names(Zone, slugs)


def plan_names(slugs: Iterable[str]) -> dict[str, str]:
    return _names(Plan, slugs)


def forget() -> None:
    """Drop the kept names (tests that roll back the rows behind a version)."""
    with _lock:
        _kept.clear()
