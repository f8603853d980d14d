"""The image marketplace's operations: the only writers of images, variants, ratings and their counters.

Pages, the API, the admin, the CLI (through the API), the loader and the instances app (through
``instances.images``) all come through here, so the rendered description, the search columns and the cached
counters always agree with the image.
"""

import uuid
from dataclasses import dataclass
from decimal import Decimal

from django.core.cache import cache
from django.db import IntegrityError, transaction
from django.db.models import Count, F, Q, Sum
from django.utils import timezone
from django.utils.crypto import get_random_string
from django.utils.text import slugify
from django.utils.translation import gettext as _

from accounts.ops import roles
from accounts.ops.audit import Actor, record
from accounts.ops.choices import AuditAction
from billing.choices import TransactionKind
from billing.models import LedgerTransaction
from billing.quote import PriceBook, quote
from catalog.models import Chip
from core import visitor_cache
from core.errors import Conflict, NotFound, ServiceError
from core.validators import clean_display_name
from instances import snapshots
from instances.capacity import free_cards
from instances.choices import Backend, Status
from instances.lifecycle import get_instance
from instances.models import Instance, InstanceEvent
from teams.access import refuse_if_seen
from teams.accounts import is_account, team_name

from ..choices import (
    CPU_ONLY,
    IMAGE_ORDERING,
    IMAGE_REVIEW_MOVES,
    ImageCategory,
    ImageReview,
    ImageSort,
    ImageStatus,
)
from ..hub import cards
from ..models import Image, ImageEvent, ImageImport, ImageRating, ImageVariant
from . import oci, search

MAX_NAME = 120
MAX_DESCRIPTION = 20_000
MAX_COMMENT = 1000
MAX_REASON = 500
FRAMEWORKS_CACHE = "marketplace:images:frameworks"
FRAMEWORKS_SECONDS = 300
# The visitors' image pages (the marketplace and each image's page: ``core.visitor_cache``) share one generation:
# any change to an image or a variant of one is a new generation of all of them.
VISITOR_PAGES = "images"


class Forbidden(ServiceError):
    """The caller may see the object but not do this to it (rate without having run it, or their own image)."""

    status = 403
    code = "forbidden"


# Reading ----------------------------------------------------------------------------------------------------


def _key(key) -> tuple[str, object]:
    """(field, value) of an image's key: its public id, or else its slug."""
    try:
        return "public_id", uuid.UUID(str(key))
    except ValueError:
        return "slug", str(key)


def _lookup(key) -> Q:
    field, value = _key(key)
    return Q(**{field: value})


def get_image(user, key, action: str = "view") -> Image:
    """The image ``key`` (its slug or public id) if ``user`` may see it, with its import record (an image's page
    shows the import's step); a missing image and someone else's private one answer the same 404. The image a copy
    was cloned from is read only for a copy, when its page names it."""
    image = Image.objects.select_related("imported").one_for(user, _lookup(key), action) if key else None
    if image is None:
        if key:  # a team member whose role may only see the team's image is told so
            refuse_if_seen(user, Image.objects.all(), action, _lookup(key))
        raise NotFound(_("No image “%(key)s” here.") % {"key": key})
    return image


def family_of_chip(slug: str) -> str:
    """The chip family of the chip ``slug`` (the marketplace filters by family); an unknown chip is a 404."""
    family = Chip.objects.filter(slug=slug).values_list("backend", flat=True).first()
    if not family:
        raise NotFound(_("Unknown chip “%(slug)s”.") % {"slug": slug}, code="unknown_chip")
    return family


def search_images(user, query: search.ImageQuery, sort: str = ImageSort.POPULAR, *, mine: bool = False, account=None):
    """The images ``user`` may see that match ``query`` in ``sort`` order, variants prefetched (a lazy queryset:
    two queries per page whatever the number of images). ``mine``: only those of ``account`` (the context's: the
    person, or a team; default the user)."""
    ordering = IMAGE_ORDERING.get(sort)
    if ordering is None:
        raise ServiceError(_("Unknown sort order “%(sort)s”.") % {"sort": sort}, code="invalid_sort")
    if query.category and query.category not in ImageCategory.values:
        raise ServiceError(_("Unknown category “%(value)s”.") % {"value": query.category}, code="invalid_category")
    if query.family and query.family not in [*Backend.values, "cpu"]:
        raise ServiceError(
            _("Unknown chip family “%(value)s”: use npu, mlu, dcu, cuda or cpu.") % {"value": query.family},
            code="invalid_family",
        )
    images = Image.objects.for_user(user, "view")
    if mine:
        authenticated = getattr(user, "is_authenticated", False)
        images = images.filter(owner=account or user) if authenticated else images.none()
    images = search.apply(images, query).select_related("owner", "imported").prefetch_related("variants")
    heavy = ("description", "description_html", "description_zh", "description_zh_html", "search_text", "facet_text")
    return images.defer(*heavy).order_by(*ordering)


def framework_options() -> list[str]:
    """The frameworks the filter menu offers: every framework name of the listed images. Finding them reads every
    listed image, so the menu is cached for a few minutes (and dropped when an image is listed)."""
    names = cache.get(FRAMEWORKS_CACHE)
    if names is None:
        found = set()
        for frameworks in Image.objects.listed().values_list("frameworks", flat=True):
            found.update(search.framework_name(f) for f in frameworks)
        names = sorted(found, key=str.casefold)
        cache.set(FRAMEWORKS_CACHE, names, FRAMEWORKS_SECONDS)
    return names


def _usable_variants(user):
    """Variants an instance may boot for ``user``: of listed images or the user's own, ready (not being saved)."""
    visible = Q(image__review_state=ImageReview.LISTED)
    if getattr(user, "is_authenticated", False):
        visible |= Q(image__owner=user)
    return ImageVariant.objects.filter(visible, image__status=ImageStatus.READY).select_related("image")


def variants_for(family: str | None, user=None) -> list[ImageVariant]:
    """Variants that boot on ``family`` for ``user``, official ones first (None: the no-card mode, where every
    variant boots on the CPU; the CPU-only ones come first)."""
    variants = _usable_variants(user)
    if family is not None:
        variants = variants.filter(family=family)
    ordered = variants.order_by(F("image__owner").asc(nulls_first=True), "image__sort_order", "image__slug")
    result = list(ordered)
    if family is None:
        result.sort(key=lambda v: not v.is_cpu_only)
    return result


def resolve_variant(slug: str, family: str | None, user=None) -> ImageVariant:
    """The variant ``slug`` if ``user`` may boot it on ``family``; bad input (400) otherwise, naming the images
    that do run there."""
    variant = _usable_variants(user).filter(slug=slug).first() if slug else None
    if variant is None:
        raise NotFound(_("Unknown image “%(slug)s”.") % {"slug": slug}, code="unknown_image")
    if family is not None and variant.family != family and not _imported(variant):
        names = ", ".join(v.slug for v in variants_for(family, user)[:12])
        raise ServiceError(
            _("The image “%(image)s” does not run on %(family)s cards; choose one of: %(names)s.")
            % {"image": variant.slug, "family": Backend(family).label, "names": names},
            code="incompatible_image",
        )
    return variant


def _imported(variant: ImageVariant) -> bool:
    """An imported image is one root file system that boots on any card: its family is what its libraries are for
    (a launch on another family's card is warned about, not refused), where an official image has a build per
    family."""
    return ImageImport.objects.filter(image_id=variant.image_id).exists()


def imported_elsewhere(family: str | None, user=None) -> list[ImageVariant]:
    """The user's imported images built for another family than ``family`` (none for the no-card mode, where every
    image is offered already): the wizard lists them after the matching ones, with a warning."""
    if family is None:
        return []
    variants = _usable_variants(user).filter(image__owner=user, image__imported__isnull=False)
    return list(variants.exclude(family=family).order_by("image__slug"))


def family_warning(slug: str, family: str | None) -> str:
    """What to tell someone launching the imported image's variant ``slug`` on a card of ``family`` that its image
    is not for ("" when it matches, for the no-card mode and for official images, whose variants always match)."""
    if family is None or not slug:
        return ""
    built_for = (
        ImageVariant.objects.filter(slug=slug, image__imported__isnull=False).values_list("family", flat=True).first()
    )
    if built_for is None or built_for == family:
        return ""
    card = Backend(family).label
    if not built_for:
        return _(
            "This image holds no chip family's libraries (CPU only): on %(card)s cards its programs will not use "
            "the card unless you install its software yourself."
        ) % {"card": card}
    return _(
        "This image is built for %(image)s: on %(card)s cards its programs will likely find no accelerator they "
        "can use. Choose a chip of its family, or launch it anyway if you know it runs here."
    ) % {"image": Backend(built_for).label, "card": card}


def find_variant(slug: str) -> ImageVariant | None:
    """The variant an instance records, whoever may still see its image (None if it was deleted)."""
    return ImageVariant.objects.select_related("image").filter(slug=slug).first()


def hold_variant(slug: str) -> bool:
    """Keep the variant ``slug`` from being removed until the caller's transaction ends: an imported image's row is
    locked, so that its removal (``imports.remove_image``, which locks it too) waits for a launch that boots it and
    the launch for the removal. The platform's images and saved ones are not removed under a launch, and are not
    locked (one row serves every family's launches). False when the variant is gone."""
    found = ImageVariant.objects.filter(slug=slug).values_list("image_id", "image__imported__id").first()
    if found is None:
        return False
    image_id, imported = found
    if imported is None:
        return True
    return bool(list(Image.objects.select_for_update(of=("self",)).filter(pk=image_id).values_list("pk")))


def variant_names(slugs) -> dict[str, tuple[str, str]]:
    """slug → (English name, Chinese name) for many variants in one query."""
    rows = ImageVariant.objects.filter(slug__in=set(slugs)).values_list("slug", "image__name", "image__name_zh")
    return {slug: (name, name_zh) for slug, name, name_zh in rows}


def boot_root(slug: str) -> dict | None:
    """The root file system and run settings of an imported image's variant (None for any other image)."""
    record = ImageImport.objects.filter(image__variants__slug=slug, image__status=ImageStatus.READY).first()
    if record is None:
        return None
    lab = record.checks.get("jupyterlab") or ""
    # An image imported before the import looked for jupyter-server-proxy keeps its port buttons.
    ports = record.checks.get("lab_ports", True)
    return {**record.config, "jupyterlab": lab, "lab_ports": ports, "rootfs": str(oci.rootfs_of(record.tag))}


# How long a page may show the cards free on an image's chips (the same for everyone; a clone or a launch reads them
# live).
FREE_CARDS_SECONDS = 5
# Whether a user ran an image: once they have, they always have (instances and their events are never deleted).
RAN_KEY = "images:ran:{user}:{image}"
RAN_SECONDS = 24 * 3600


def shown_free_cards(chips) -> dict[int, int]:
    """:func:`~instances.capacity.free_cards` of ``chips`` as a page shows them: read once per
    ``FREE_CARDS_SECONDS`` at most (the same for everyone and every language)."""
    key = "images:free-cards:" + ",".join(str(chip.pk) for chip in chips)
    free = cache.get(key)
    if free is None:
        free = free_cards(chips)
        cache.set(key, free, FREE_CARDS_SECONDS)
    return free


def ran_image(user, image: Image, variants=None) -> bool:
    """Whether ``user`` ever had an instance of one of ``image``'s variants reach running (``variants``: the image's,
    when the caller has read them). A yes is kept: it never changes."""
    if not getattr(user, "is_authenticated", False):
        return False
    key = RAN_KEY.format(user=user.pk, image=image.pk)
    if cache.get(key):
        return True
    if variants is None:
        slugs = ImageVariant.objects.filter(image=image).values("slug")
    else:
        slugs = [variant.slug for variant in variants]
    ran = InstanceEvent.objects.filter(instance__owner=user, instance__image__in=slugs, new=Status.RUNNING).exists()
    if ran:
        cache.set(key, True, RAN_SECONDS)
    return ran


def ratings_of(image: Image, limit: int = 20):
    """The latest ratings of ``image``, without who gave them (the page does not show raters)."""
    return ImageRating.objects.filter(image=image).order_by("-updated_at", "-id")[:limit]


def events_of(image: Image):
    return ImageEvent.objects.filter(image=image).order_by("at", "id")


@dataclass(frozen=True)
class ChipOffer:
    """The cheapest rentable chip of one variant's family, priced per card-hour by the quote function, with
    the cards free on it now."""

    variant: ImageVariant
    chip: Chip | None
    list_per_card_hour: Decimal | None
    per_card_hour: Decimal | None
    free_cards: int

    @property
    def subsidised(self) -> bool:
        return self.per_card_hour is not None and self.per_card_hour < self.list_per_card_hour


def offered_chips(variants) -> list[Chip]:
    """The chips offered for the families of ``variants`` (an image's) that need a card, in catalogue order."""
    families = [v.family for v in variants if not v.is_cpu_only]
    return list(Chip.objects.offered().filter(backend__in=families).order_by("sort_order"))


def chip_offers(image: Image, book: PriceBook, *, variants=None, chips=None, free=None) -> list[ChipOffer]:
    """One row per chip variant of ``image``: the family's cheapest chip (with free cards when any has them),
    pay-as-you-go after subsidies. ``variants`` (the image's) and ``chips`` (:func:`offered_chips` of them) when the
    caller has them; the cards free (``free``: :func:`shown_free_cards`, for a page) are read now otherwise, in one
    query. A fixed number of queries whatever the catalogue's size."""
    variants = list(image.variants.all()) if variants is None else variants
    chips = offered_chips(variants) if chips is None else chips
    variants = [v for v in variants if not v.is_cpu_only]
    free = free_cards(chips) if free is None else free
    priced: list[tuple[Chip, object]] = []
    for chip in chips:
        try:
            priced.append((chip, quote(chip=chip, cards=1, book=book)))
        except ServiceError:
            continue  # not offered in any zone yet, or no price published
    offers = []
    for variant in sorted(variants, key=lambda v: Backend.values.index(v.family)):
        mine = [(c, q) for c, q in priced if c.backend == variant.family]
        # Cheapest with free cards first; a family that is full still shows its cheapest price.
        mine.sort(key=lambda cq: (free.get(cq[0].pk, 0) == 0, cq[1].payable_per_card_hour, cq[0].sort_order))
        if mine:
            chip, q = mine[0]
            offers.append(ChipOffer(variant, chip, q.list_per_card_hour, q.payable_per_card_hour, free.get(chip.pk, 0)))
        else:
            offers.append(ChipOffer(variant, None, None, None, 0))
    return offers


def earnings(user) -> dict:
    """What ``user`` earned from their community images: totals per image and the latest payouts."""
    payouts = LedgerTransaction.objects.filter(user=user, kind=TransactionKind.AUTHOR_PAYOUT)
    per_image = {
        row["resource_id"]: row
        for row in payouts.values("resource_id").annotate(total=Sum("user_amount"), charges=Count("id")).order_by()
    }
    images = Image.objects.filter(owner=user).order_by("-usage_count", "-id")
    rows = [(image, per_image.get(image.public_id)) for image in images]
    total = sum((r["total"] for r in per_image.values()), Decimal("0"))
    return {"rows": rows, "total": total, "recent": payouts.order_by("-created_at", "-pk")[:20]}


# Writing ----------------------------------------------------------------------------------------------------


def _clean_name(name) -> str:
    return clean_display_name(name, max_length=MAX_NAME, field_label=_("image"))


def _clean_description(text) -> str:
    if text is None:
        return ""
    if not isinstance(text, str) or len(text) > MAX_DESCRIPTION:
        raise ServiceError(
            _("The description is Markdown of at most %(max)d characters.") % {"max": MAX_DESCRIPTION},
            code="invalid_description",
        )
    return text


def render_description(text: str) -> str:
    """Markdown → sanitised HTML with the hub's card renderer (raw HTML off, then nh3): no script survives."""
    return cards.render(text)


def reindex(image: Image, variants=None) -> None:
    """Recompute the image's search columns from it and its variants and save them."""
    variants = list(image.variants.all()) if variants is None else variants
    image.search_text, image.facet_text = search.document(image, variants)
    Image.objects.filter(pk=image.pk).update(search_text=image.search_text, facet_text=image.facet_text)


@transaction.atomic
def save_edits(image: Image) -> Image:
    """Save staff edits of an image (the back office): the description is re-rendered and the search columns
    recomputed, so both always follow what was typed."""
    image.description_html = render_description(image.description)
    image.description_zh_html = render_description(image.description_zh)
    image.save()
    reindex(image)
    return image


def _unique_slug(base: str) -> str:
    stem = slugify(base)[:30].strip("-") or "image"
    return f"{stem}-{get_random_string(6, 'abcdefghijklmnopqrstuvwxyz0123456789')}"


def _publisher_name(user) -> str:
    """The name an image shows as its publisher: a team's name, or the person's address before the @."""
    return (team_name(user.pk) if is_account(user) else user.email.split("@", 1)[0])[:100]


def _event(image: Image, old: str, new: str, reason: str = "", by=None) -> None:
    ImageEvent.objects.create(image=image, old=old, new=new, reason=reason[:MAX_REASON], by=by)


def _copy_variants(image: Image, variants, size_bytes: int | None = None) -> list[ImageVariant]:
    copies = [
        ImageVariant(
            image=image,
            family=v.family,
            slug=f"{image.slug}-{v.family or 'cpu'}",
            os=v.os,
            stack=list(v.stack),
            size_bytes=v.size_bytes if size_bytes is None else size_bytes,
        )
        for v in variants
    ]
    return ImageVariant.objects.bulk_create(copies)


def team_private(user, image: Image) -> bool:
    """Whether ``image`` is a team's and private to it (not listed for everyone), seen by someone other than the
    team's account: it stays in the team, so copying or launching it happens in the team."""
    return (
        image.owner_id is not None
        and image.owner_id != getattr(user, "pk", None)
        and image.review_state != ImageReview.LISTED
        and is_account(image.owner)
    )


@transaction.atomic
def clone_to_mine(user, image: Image, name: str = "") -> Image:
    """ "Clone to my images": a private copy of ``image`` (all its variants) that ``user`` can launch, describe
    and publish. Platform images stay as they are. A team's private image stays in the team: its copy is the
    team's too, made by a member whose role may operate the team's things (a listed one is copied like any other)."""
    if not getattr(user, "is_authenticated", False):
        raise Forbidden(_("Log in to clone images."))
    if ImageImport.objects.filter(image=image).exists():
        # The copy would name no root file system and boot the runtime's instead of the image's files.
        raise Conflict(
            _("An imported image cannot be copied yet: launch it, or import its reference again."),
            code="imported_image",
        )
    owner = user
    if team_private(user, image):
        image = get_image(user, image.public_id, action="change")
        owner = image.owner
    name = _clean_name(name or _("%(name)s (my copy)") % {"name": image.name})[:MAX_NAME]
    copy = Image.objects.create(
        slug=_unique_slug(image.slug),
        name=name,
        name_zh="",
        summary=image.summary,
        summary_zh=image.summary_zh,
        description=image.description,
        description_html=render_description(image.description),
        description_zh=image.description_zh,
        description_zh_html=render_description(image.description_zh),
        publisher=_publisher_name(owner),
        owner=owner,
        category=ImageCategory.COMMUNITY,
        tags=list(image.tags),
        frameworks=list(image.frameworks),
        size_bytes=image.size_bytes,
        review_state=ImageReview.DRAFT,
        status=ImageStatus.READY,
        cloned_from=image,
    )
    variants = _copy_variants(copy, image.variants.all())
    reindex(copy, variants)
    _event(copy, "", ImageReview.DRAFT, reason=f"cloned from {image.slug}", by=user)
    return copy


def _stopped_instance(user, instance_id) -> Instance:
    instance = get_instance(user, instance_id, action="change")
    if instance.status != Status.STOPPED:
        raise Conflict(
            _("Only a stopped instance can be saved as an image; “%(name)s” is %(status)s.")
            % {"name": instance.name, "status": instance.get_status_display()},
            code="instance_not_stopped",
        )
    return instance


def snapshot_size(user, instance_id) -> int:
    """What an image saved from the caller's stopped instance would weigh (shown before saving)."""
    return snapshots.system_disk_usage(_stopped_instance(user, instance_id))


def save_instance_as_image(user, instance_id, *, name: str, description: str = "") -> Image:
    """Save the caller's stopped instance as a private image. The image is ``saving`` until the backend has
    snapshotted the system disk (a task, enqueued on commit); then it is ready to launch, clone or publish. A
    team's instance makes the team's image, private to the team: a member may not take a copy of it home."""
    from instances.images import find_variant

    name = _clean_name(name)
    description = _clean_description(description)
    size = snapshot_size(user, instance_id)
    instance = _stopped_instance(user, instance_id)
    base = find_variant(instance.image)
    family = instance.family or CPU_ONLY
    with transaction.atomic():
        image = Image.objects.create(
            slug=_unique_slug(name),
            name=name,
            description=description,
            description_html=render_description(description),
            publisher=_publisher_name(instance.owner),
            owner=instance.owner,
            category=ImageCategory.COMMUNITY,
            tags=list(base.image.tags) if base else [],
            frameworks=list(base.image.frameworks) if base else [],
            size_bytes=size,
            review_state=ImageReview.DRAFT,
            status=ImageStatus.SAVING,
            source_instance=instance.public_id,
            cloned_from=base.image if base else None,
        )
        os_name = base.os if base else "Ubuntu 22.04"
        variant = ImageVariant.objects.create(
            image=image,
            family=family,
            slug=f"{image.slug}-{family or 'cpu'}",
            os=os_name,
            stack=list(base.stack) if base else [],
            size_bytes=size,
        )
        reindex(image, [variant])
        _event(image, "", ImageStatus.SAVING, reason=f"instance {instance.public_id}", by=user)
        from .. import tasks

        transaction.on_commit(lambda: tasks.snapshot_image.delay(image.pk))
    return image


def complete_snapshot(image_id: int) -> str | None:
    """The task's work: snapshot the system disk of the image's instance and mark the image ready (or failed
    with the reason). Idempotent: an image that is no longer saving is left alone. Returns the new status."""
    image = Image.objects.filter(pk=image_id, status=ImageStatus.SAVING).first()
    if image is None:
        return None
    instance = Instance.objects.select_related("spec").filter(public_id=image.source_instance).first()
    if instance is None or instance.status != Status.STOPPED:
        return _finish_snapshot(
            image,
            ImageStatus.FAILED,
            _("The instance was started or released before its disk was saved; stop it and save again."),
        )
    try:
        size = snapshots.snapshot_system_disk(instance)  # a backend briefly unreachable raises: the task retries
    except ServiceError as exc:
        return _finish_snapshot(image, ImageStatus.FAILED, str(exc.message))
    return _finish_snapshot(image, ImageStatus.READY, "", size)


def _finish_snapshot(image: Image, status: str, detail: str, size: int | None = None) -> str | None:
    with transaction.atomic():
        # updated_at too: an update() does not move it, and the image's page keeps its parts under it.
        changes = {"status": status, "status_detail": detail[:255], "updated_at": timezone.now()}
        if size is not None:
            changes["size_bytes"] = size
        if not Image.objects.filter(pk=image.pk, status=ImageStatus.SAVING).update(**changes):
            return None  # another worker finished it first
        if size is not None:
            ImageVariant.objects.filter(image=image).update(size_bytes=size)
        _event(image, ImageStatus.SAVING, status, reason=detail)
        visitor_cache.bump(VISITOR_PAGES)  # the variants changed by update(): the pages that keep them are told
    return status


def _move_review(image: Image, new: str, *, by, reason: str = "", **changes) -> Image:
    """The one writer of ``review_state``: a guarded compare-and-set with an event row."""
    image.refresh_from_db(fields=["review_state"])
    old = image.review_state
    if new not in IMAGE_REVIEW_MOVES.get(old, ()):
        raise Conflict(
            _("This image is %(state)s; it cannot become %(new)s.")
            % {"state": image.get_review_state_display(), "new": ImageReview(new).label},
            code="invalid_review_move",
        )
    with transaction.atomic():
        if not Image.objects.filter(pk=image.pk, review_state=old).update(review_state=new, **changes):
            raise Conflict(_("Someone else changed this image meanwhile; reload and try again."))
        _event(image, old, new, reason=reason, by=by)
    if new == ImageReview.LISTED:
        cache.delete(FRAMEWORKS_CACHE)
    visitor_cache.bump(VISITOR_PAGES)  # an update() sends no signal: the visitors' image pages are told here
    image.refresh_from_db()
    return image


def publish(user, image: Image) -> Image:
    """Ask staff to list one of the user's private (or rejected) images for everyone."""
    image = get_image(user, image.public_id, action="change")
    if image.status != ImageStatus.READY:
        raise Conflict(_("The image is still being saved; publish it when it is ready."), code="image_not_ready")
    return _move_review(image, ImageReview.PENDING, by=user, published_at=timezone.now(), review_reason="")


def review_image(image: Image, approve: bool, reason: str, by, *, ip: str | None = None) -> Image:
    """Staff with the review role decide on an image waiting for review: list it, or reject it with a reason the
    author sees. The decision is audited (one ``AuditEntry``, from ``ip`` when given) in its transaction.

    The back office (``/ops/``), the admin, the review page and the API call this. Raises ``roles.Forbidden`` (403)
    for anyone without ``REVIEW_IMAGE``, ServiceError for a rejection without a reason, Conflict when the image is
    not waiting for review.
    """
    roles.require(by, roles.REVIEW_IMAGE)
    reason = (reason or "").strip()[:MAX_REASON]
    if not approve and not reason:
        raise ServiceError(_("Say why the image is rejected: the author sees the reason."), code="reason_required")
    new = ImageReview.LISTED if approve else ImageReview.REJECTED
    with transaction.atomic():
        image = _move_review(
            image, new, by=by, reason=reason, review_reason=reason, reviewed_at=timezone.now(), reviewed_by=by
        )
        action = AuditAction.IMAGE_APPROVED if approve else AuditAction.IMAGE_REJECTED
        after = {"review_state": image.review_state, "owner": getattr(image.owner, "email", "")}
        record(Actor(by, ip), action, image, reason=reason, before={"review_state": ImageReview.PENDING}, after=after)
    return image


def pending_review():
    return Image.objects.filter(review_state=ImageReview.PENDING).select_related("owner").order_by("published_at")


def rate(user, image: Image, stars, comment: str = "") -> ImageRating:
    """Rate an image 1–5 with a comment; only a user who ran it (an instance of it reached running), never its
    author. A second rating replaces the first. The image's count and average follow in the same transaction."""
    if not getattr(user, "is_authenticated", False):
        raise Forbidden(_("Log in to rate images."))
    if isinstance(stars, bool) or not isinstance(stars, int) or not 1 <= stars <= 5:
        raise ServiceError(_("A rating is 1 to 5 stars."), code="invalid_stars")
    comment = (comment or "").strip() if isinstance(comment, str) else ""
    if len(comment) > MAX_COMMENT:
        raise ServiceError(_("A comment has at most %(max)d characters.") % {"max": MAX_COMMENT}, code="invalid")
    if image.owner_id == user.pk:
        raise Forbidden(_("You cannot rate your own image."), code="own_image")
    if not ran_image(user, image):
        raise Forbidden(_("Only users who ran this image can rate it: launch it first."), code="not_ran")
    with transaction.atomic():
        Image.objects.select_for_update().filter(pk=image.pk).first()
        rating, _created = ImageRating.objects.update_or_create(
            image=image, user=user, defaults={"stars": stars, "comment": comment}
        )
        totals = ImageRating.objects.filter(image=image).aggregate(count=Count("id"), total=Sum("stars"))
        count, total = totals["count"] or 0, totals["total"] or 0
        average = (Decimal(total) / count).quantize(Decimal("0.01")) if count else Decimal("0")
        Image.objects.filter(pk=image.pk).update(rating_count=count, rating_sum=total, rating_average=average)
        visitor_cache.bump(VISITOR_PAGES)  # an update() sends no signal: the pages that list ratings are told here
    return rating


def record_launch(variant_slug: str) -> None:
    """Count one launch of the variant's image (the "most used" order). A single UPDATE: safe concurrently."""
    Image.objects.filter(variants__slug=variant_slug).update(usage_count=F("usage_count") + 1)


# The official catalogue -------------------------------------------------------------------------------------


def save_catalog_image(entry: dict, publisher: str, *, update: bool = False) -> tuple[Image, bool]:
    """Create (or, with ``update``, rewrite) one platform image and its variants from a catalogue entry.
    Returns (image, created). Counters and ratings are never touched."""
    fields = {
        "name": entry["name"],
        "name_zh": entry.get("name_zh", ""),
        "summary": entry.get("summary", ""),
        "summary_zh": entry.get("summary_zh", ""),
        "description": entry.get("description", "").strip(),
        "description_zh": entry.get("description_zh", "").strip(),
        "publisher": publisher,
        "category": entry["category"],
        "tags": list(entry.get("tags", [])),
        "frameworks": list(entry.get("frameworks", [])),
        "size_bytes": _gigabytes(entry.get("size_gb", "0")),
        "sort_order": int(entry.get("sort_order", 100)),
    }
    if fields["category"] not in ImageCategory.values:
        raise ServiceError(f"unknown category {fields['category']!r} for {entry['slug']}")
    with transaction.atomic():
        image = Image.objects.select_for_update().filter(slug=entry["slug"]).first()
        created = image is None
        if image is not None and image.owner_id is not None:
            raise Conflict(f"the slug {entry['slug']} belongs to a user's image")
        if image is None:
            image = Image(slug=entry["slug"], owner=None, review_state=ImageReview.LISTED)
        elif not update:
            return image, False
        for name, value in fields.items():
            setattr(image, name, value)
        image.description_html = render_description(image.description)
        image.description_zh_html = render_description(image.description_zh)
        image.save()
        _save_catalog_variants(image, entry.get("variant", []))
        reindex(image)
    cache.delete(FRAMEWORKS_CACHE)
    return image, created


def _save_catalog_variants(image: Image, entries: list[dict]) -> None:
    for entry in entries:
        family = entry.get("family", CPU_ONLY)
        if family not in [*Backend.values, CPU_ONLY]:
            raise ServiceError(f"unknown chip family {family!r} in {image.slug}")
        values = {
            "image": image,
            "family": family,
            "os": entry["os"],
            "stack": list(entry.get("stack", [])),
            "size_bytes": _gigabytes(entry.get("size_gb", "0")),
        }
        try:
            with transaction.atomic():
                ImageVariant.objects.update_or_create(slug=entry["slug"], defaults=values)
        except IntegrityError as exc:
            raise Conflict(f"variant {entry['slug']} clashes with another of {image.slug}") from exc
    keep = [e["slug"] for e in entries]
    ImageVariant.objects.filter(image=image).exclude(slug__in=keep).delete()


def _gigabytes(value) -> int:
    return int(Decimal(str(value)) * 10**9)
