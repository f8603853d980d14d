"""The names people read for the chip, zone and plan slugs that usage sessions and reports keep.

Sessions and the ledger store slugs ("ascend-910b", "cn-east-xc", "payg") so history survives renames; a page
shows the catalog's name in the reader's language instead (one query per kind). A slug no longer in the catalog
is shown as it is.
"""

from collections.abc import Iterable

from catalog.models import Chip, Zone

from .models import Plan


def _names(model, slugs: Iterable[str]) -> dict[str, str]:
    wanted = {slug for slug in slugs if slug}
    if not wanted:
        return {}
    return {item.slug: item.label for item in model.objects.filter(slug__in=wanted).only("slug", "name", "name_zh")}


def chip_names(slugs: Iterable[str]) -> dict[str, str]:
    """slug → the chip's name in the active language, e.g. 'ascend-910b' → '昇腾 910B'."""
    return _names(Chip, slugs)


def zone_names(slugs: Iterable[str]) -> dict[str, str]:
    return _names(Zone, slugs)


def plan_names(slugs: Iterable[str]) -> dict[str, str]:
    return _names(Plan, slugs)
