"""The official image catalogue (``catalog.toml`` beside this module): SPEC §7's images and the case studies.

``load()`` is idempotent: images are created when missing and otherwise left as staff edited them
(``update=True`` rewrites them from the file). Launch counts and ratings are never touched.
"""

import hashlib
import tomllib
from functools import cache
from pathlib import Path

from django.db import transaction

from . import services

CATALOG_FILE = Path(__file__).with_name("catalog.toml")

# The descriptions this file shipped when each held its English and Chinese sections in one text (the first 16 hex
# digits of their SHA-256). An image whose description is still one of them was never edited by staff, so
# ``load()`` splits it into the file's English and Chinese descriptions without waiting for ``--update``.
COMBINED_DESCRIPTIONS = frozenset(
    {
        "a5acbd1c1c3b253f",
        "6fa4518130bc0cb4",
        "c6b0c65b5fe217e0",
        "ce73468f5579316b",
        "ac1abcb7172d5207",
        "2b63652ec4459e06",
        "c5b7d033272c39f5",
        "2b38259e894a5ee3",
        "1eaae78bba46f015",
        "0553cc8ddd1abcc4",
        "65a40ed3a3dacaa6",
        "da61ccbebc02a694",
    }
)


FORMER_PUBLISHER = "星宇智算 · official"  # what the catalogue said before: English on a Chinese page


@cache
def entries() -> dict:
    with CATALOG_FILE.open("rb") as fh:
        return tomllib.load(fh)


@transaction.atomic
def load(*, update: bool = False) -> dict[str, int]:
    """Create the catalogue's images (and, with ``update``, rewrite existing ones). Returns counts."""
    data = entries()
    created = kept = 0
    for entry in data["image"]:
        image, was_created = services.save_catalog_image(entry, data["publisher"], update=update)
        created += was_created
        kept += not was_created
        if image.publisher == FORMER_PUBLISHER:  # the page shows "official" as a translated badge instead
            image.publisher = data["publisher"]
            services.save_edits(image)
        if _has_earlier_description(image):  # never edited by staff: the catalogue's current words
            image.description = entry.get("description", "").strip()
            image.description_zh = entry.get("description_zh", "").strip()
            services.save_edits(image)
        if _has_combined_description(image):
            image.description = entry.get("description", "").strip()
            image.description_zh = entry.get("description_zh", "").strip()
            services.save_edits(image)
    return {"created": created, "existing": kept}


# The English and Chinese descriptions (the first 16 hex digits of the SHA-256 of both, joined by a newline and a
# NUL) that earlier releases of the catalogue wrote: an image that still has them was never edited by staff, so
# ``load()`` gives it the current descriptions without waiting for ``update``.
EARLIER_DESCRIPTIONS = frozenset(
    {"c8cdc3ab067be6bc", "3fa5dad89a16e766", "3e851f538d91602b", "d0748333a4e90d87", "fef2955f7caff92b"}
)


def _has_earlier_description(image) -> bool:
    both = f"{image.description.strip()}\n\0{image.description_zh.strip()}"
    return hashlib.sha256(both.encode()).hexdigest()[:16] in EARLIER_DESCRIPTIONS


def _has_combined_description(image) -> bool:
    fingerprint = hashlib.sha256(image.description.strip().encode()).hexdigest()[:16]
    return not image.description_zh and fingerprint in COMBINED_DESCRIPTIONS
