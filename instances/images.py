"""The images an instance can boot: the marketplace's image variants (one per chip family of an image).

The seam between instances and the marketplace: instances record the variant they boot by its slug
(``Instance.image``), and everything the instances app asks about images goes through these functions. The
marketplace, which keeps the images, registers what answers them when Django starts (:func:`register_source`);
instances import nothing of it. A user may boot variants of listed images and of their own images.
"""

from typing import Protocol

from django.core.cache import cache
from django.utils.translation import get_language
from django.utils.translation import gettext as _

from core.errors import NotFound

# Names are shown on every instance page and API row; they change rarely, so they are cached for a while
# (one query per slug per few minutes, not one per row).
NAME_CACHE_SECONDS = 300


class ImageSource(Protocol):
    """What the marketplace answers about the variants instances boot."""

    def variants_for(self, family: str | None, user=None) -> list: ...
    def resolve_variant(self, slug: str, family: str | None, user=None): ...
    def find_variant(self, slug: str): ...
    def record_launch(self, slug: str) -> None: ...
    def hold_variant(self, slug: str) -> bool: ...
    def variant_names(self, slugs) -> dict: ...
    def boot_root(self, slug: str) -> dict | None: ...
    def imported_elsewhere(self, family: str | None, user=None) -> list: ...
    def family_warning(self, slug: str, family: str | None) -> str: ...


_source: ImageSource | None = None


def register_source(source: ImageSource) -> None:
    global _source
    _source = source


def source() -> ImageSource:
    """The registered image source; none means the marketplace is not installed, and no instance can boot."""
    if _source is None:
        raise RuntimeError("no image source is registered (the marketplace app registers it when installed)")
    return _source


def compatible_images(family: str | None, user=None) -> list:
    """Variants that boot on ``family`` for ``user`` (None: the no-card mode, where every image boots on the
    CPU), official images first."""
    return source().variants_for(family, user)


def other_family_images(family: str | None, user=None) -> list:
    """The user's imported images built for another chip family than ``family``: they boot there too, with a
    warning (:func:`family_warning`)."""
    return source().imported_elsewhere(family, user)


def family_warning(slug: str, family: str | None) -> str:
    """Why the variant ``slug`` may not use a card of ``family`` (an imported image built for another family), or
    "" when nothing needs saying."""
    return source().family_warning(slug, family)


def launch_warning(instance) -> str:
    """:func:`family_warning` for a launched instance's image and card."""
    return family_warning(instance.image, instance.family)


def get_image(slug: str, family: str | None, user=None):
    """The variant ``slug`` if ``user`` may boot it on ``family``; otherwise 404 ``unknown_image`` (none, or not
    the user's to boot) or 400 ``incompatible_image``."""
    return source().resolve_variant(slug, family, user)


def find_variant(slug: str):
    """The variant an instance records, whoever may still see its image (None if it was deleted)."""
    return source().find_variant(slug) if slug else None


def boot_root(slug: str) -> dict | None:
    """For a variant of an image imported from a registry: its unpacked root file system (``rootfs``) and the
    image's run settings (``entrypoint``, ``cmd``, ``env``, ``working_dir``, ``user``, ``exposed_ports``); None for
    the platform's images and images saved from machines, which boot on the runtime's root."""
    return source().boot_root(slug) if slug else None


def hold(slug: str) -> None:
    """Keep the variant ``slug`` from being removed until the caller's transaction ends (it locks the image's row; a
    removal under way is waited for). 404 ``unknown_image`` when it was removed since it was checked."""
    if not source().hold_variant(slug):
        raise NotFound(_("The image “%(slug)s” was removed.") % {"slug": slug}, code="unknown_image")


def record_launch(slug: str) -> None:
    """Count a launch of the variant's image (the marketplace's "most used" order)."""
    source().record_launch(slug)


def image_name(slug: str) -> str:
    """The name of the image a variant belongs to, in the active language (the slug if it is unknown)."""
    key = f"instances:image-name:{slug}"
    names = cache.get(key)
    if names is None:
        names = source().variant_names([slug]).get(slug, (slug, ""))
        cache.set(key, names, NAME_CACHE_SECONDS)
    english, chinese = names
    return chinese if (get_language() or "").startswith("zh") and chinese else english
