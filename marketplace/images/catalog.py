"""The official image catalogue (``catalog.toml`` beside this module): SPEC §7's images and the case studies.

``load()`` is idempotent: images are created when missing and otherwise left as staff edited them
(``update=True`` rewrites them from the file). Launch counts and ratings are never touched.
"""

import tomllib
from functools import cache
from pathlib import Path

from django.db import transaction

from . import services

CATALOG_FILE = Path(__file__).with_name("catalog.toml")


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
        _image, was_created = services.save_catalog_image(entry, data["publisher"], update=update)
        created += was_created
        kept += not was_created
    return {"created": created, "existing": kept}
