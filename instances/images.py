"""The images an instance can boot: the marketplace's image variants (one per chip family of an image).

The seam between instances and the marketplace: instances record the variant they boot by its slug
(``Instance.image``), and everything the instances app asks about images goes through these functions, which
read ``marketplace.images.services``. A user may boot variants of listed images and of their own images.
"""

from django.core.cache import cache
from django.utils.translation import get_language

# Names are shown on every instance page and API row; they change rarely, so they are cached for a while
# (one query per slug per few minutes, not one per row).
NAME_CACHE_SECONDS = 300


def compatible_images(family: str | None, user=None) -> list:
    """Variants that boot on ``family`` for ``user`` (None: the no-card mode, where every image boots on the
    CPU), official images first."""
    from marketplace.images.services import variants_for

    return variants_for(family, user)


def get_image(slug: str, family: str | None, user=None):
    """The variant ``slug`` if ``user`` may boot it on ``family``; bad input (400, ``unknown_image`` or
    ``incompatible_image``) otherwise."""
    from marketplace.images.services import resolve_variant

    return resolve_variant(slug, family, user)


def find_variant(slug: str):
    """The variant an instance records, whoever may still see its image (None if it was deleted)."""
    from marketplace.models import ImageVariant

    return ImageVariant.objects.select_related("image").filter(slug=slug).first() if slug else None


def record_launch(slug: str) -> None:
    """Count a launch of the variant's image (the marketplace's "most used" order)."""
    from marketplace.images.services import record_launch as count

    count(slug)


def image_name(slug: str) -> str:
    """The name of the image a variant belongs to, in the active language (the slug if it is unknown)."""
    from marketplace.images.services import variant_names

    key = f"instances:image-name:{slug}"
    names = cache.get(key)
    if names is None:
        names = variant_names([slug]).get(slug, (slug, ""))
        cache.set(key, names, NAME_CACHE_SECONDS)
    english, chinese = names
    return chinese if (get_language() or "").startswith("zh") and chinese else english
