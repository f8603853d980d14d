"""The image marketplace: official images with per-chip variants, community images, clone, ratings and
the authors' revenue share. Models live in ``marketplace.models`` (names start with ``Image``)."""
