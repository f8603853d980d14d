"""The hub's operations: the only writers of hub items, their files, likes and counters.

Pages, the API, the admin, the loaders and (soon) the instances' mount code all come through here, so the search
index, the rendered card and the cached counters always agree with the item.
"""

import re
from dataclasses import dataclass
from decimal import Decimal

from django.core.cache import cache
from django.db import IntegrityError, transaction
from django.db.models import Exists, F, OuterRef, Q
from django.utils.translation import get_language_info, gettext_lazy
from django.utils.translation import gettext as _

from billing.quote import PriceBook, quote
from catalog.models import Chip
from core.errors import Conflict, NotFound, ServiceError
from instances.choices import Backend

from .. import seed as catalog
from ..choices import HUB_ORDERING, HubKind, HubSort, HubVisibility
from ..models import HubFile, HubItem, HubLike
from . import cards, search

REPO_PART = r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,98}[A-Za-z0-9])?"
REPO_PATTERN = re.compile(rf"^{REPO_PART}/{REPO_PART}$")
MAX_LIST_ITEMS = 32
MAX_LIST_VALUE = 64
LICENCES_CACHE = "marketplace:hub:licences"
LICENCES_SECONDS = 300
MAX_LICENCE_OPTIONS = 200
# Counting every match of a broad query ("模型" matches most items) costs more than the page itself, so lists
# count exactly up to this many and then say "more than"; nobody pages past it rather than narrowing the search.
RESULT_COUNT_CAP = 1000


# Reading ----------------------------------------------------------------------------------------------------


def get_item(user, repo: str, action: str = "view") -> HubItem:
    """The item ``org/name`` if ``user`` may see it; a missing item and someone else's private one are alike.
    Whether ``user`` likes it is read in the same query (:func:`liked_by` answers from it)."""
    # What search reads (the indexed words and facets) is never shown: left unread.
    items = HubItem.objects.select_related("owner").defer("search_text", "facet_text")
    signed_in = getattr(user, "is_authenticated", False)
    if signed_in:
        items = items.annotate(liked=Exists(HubLike.objects.for_user(user).filter(item=OuterRef("pk"))))
    item = items.one_for(user, Q(repo=repo), action)
    if item is None:
        raise NotFound(_("No model or dataset %(repo)s here.") % {"repo": repo})
    item.liked_read_for = user.pk if signed_in else None
    return item


def search_items(user, query: search.HubQuery, sort: str = HubSort.MOUNTS):
    """The items ``user`` may see that match ``query``, in ``sort`` order (a lazy queryset to paginate).

    On SQLite the matches are counted first (up to the cap, as :func:`count_matches` reports them): how many
    there are decides how SQLite reads the page (see ``search.apply``), and the count comes with the queryset.
    """
    ordering = HUB_ORDERING.get(sort)
    if ordering is None:
        raise ServiceError(_("Unknown sort order “%(sort)s”.") % {"sort": sort}, code="invalid_sort")
    visible = HubItem.objects.for_user(user, "view")
    counted = search.count_sqlite_matches(visible, query, RESULT_COUNT_CAP + 1)
    items = visible.matching(query, many_matches=(counted or 0) > RESULT_COUNT_CAP)
    items = items.select_related("owner").defer("card", "card_html", "search_text", "facet_text").order_by(*ordering)
    items.counted_matches = counted
    return items


def count_matches(items, cap: int | None = None) -> tuple[int, bool]:
    """``(count, exact)``: the number of matches, counted up to ``cap``; ``exact`` is False when there are more.

    Items from :func:`search_items` that were counted already are not counted again.
    """
    cap = cap or RESULT_COUNT_CAP
    counted = getattr(items, "counted_matches", None)
    if counted is None or cap > RESULT_COUNT_CAP:
        counted = items.order_by()[: cap + 1].count()
    counted = min(counted, cap + 1)
    return min(counted, cap), counted <= cap


def files_of(item: HubItem):
    return HubFile.objects.filter(item=item).order_by("path")


def liked_by(user, item: HubItem) -> bool:
    if not getattr(user, "is_authenticated", False):
        return False
    if getattr(item, "liked_read_for", None) == user.pk:
        return item.liked  # read with the item, for this user
    return HubLike.objects.for_user(user).filter(item=item).exists()


@dataclass(frozen=True)
class ChipPrice:
    """The cheapest chip of a family this item runs on, priced per card-hour by the quote function."""

    family: str
    family_label: str
    chip: Chip | None
    per_card_hour: Decimal | None


def chip_prices(item: HubItem, book: PriceBook) -> list[ChipPrice]:
    """One row per compatible family: its cheapest rentable chip with a published price, pay-as-you-go."""
    chips = Chip.objects.offered().filter(backend__in=item.chips).order_by("sort_order")
    best: dict[str, tuple[Chip, Decimal]] = {}
    for chip in chips:
        try:
            price = quote(chip=chip, cards=1, book=book).payable_per_card_hour
        except ServiceError:
            continue  # not offered in any zone yet, or no price published
        if chip.backend not in best or price < best[chip.backend][1]:
            best[chip.backend] = (chip, price)
    rows = []
    for family in Backend:
        if family.value in item.chips:
            chip, price = best.get(family.value, (None, None))
            rows.append(ChipPrice(family.value, str(family.label), chip, price))
    return rows


def facet_options() -> dict[str, list[str]]:
    """Values for the filter menus: languages and frameworks from the vocabulary, licences from the public items
    (cached for a few minutes, because finding them reads every item)."""
    licences = cache.get(LICENCES_CACHE)
    if licences is None:
        public = HubItem.objects.filter(visibility=HubVisibility.PUBLIC).exclude(licence="")
        licences = sorted(public.order_by().values_list("licence", flat=True).distinct()[:MAX_LICENCE_OPTIONS])
        cache.set(LICENCES_CACHE, licences, LICENCES_SECONDS)
    filters = catalog.vocabulary()["filters"]
    return {"licence": licences, "language": filters["languages"], "framework": filters["frameworks"]}


# Names for the language codes model cards use (ISO 639-1 and Hugging Face's "multilingual"); other codes fall back
# to Django's language names, then to the code itself.
LANGUAGE_NAMES = {
    "zh": gettext_lazy("Chinese"),
    "en": gettext_lazy("English"),
    "multilingual": gettext_lazy("Multilingual"),
}


def language_label(code: str) -> str:
    """A card's language code as a name in the active language: "zh" → "Chinese" (中文)."""
    if code in LANGUAGE_NAMES:
        return str(LANGUAGE_NAMES[code])
    try:
        return str(get_language_info(code)["name_translated"])
    except KeyError:
        return code


def language_choices(codes) -> list[tuple[str, str]]:
    return [(code, language_label(code)) for code in codes]


def task_choices(language: str) -> list[tuple[str, str]]:
    key = "zh" if language.startswith("zh") else "en"
    return [(slug, names.get(key) or names["en"]) for slug, names in catalog.vocabulary()["tasks"].items()]


def task_label(task: str, language: str) -> str:
    names = catalog.task_names(task)
    return names.get("zh" if language.startswith("zh") else "en") or names.get("en") or task


# Writing ----------------------------------------------------------------------------------------------------


def _string_list(name: str, values) -> list[str]:
    if values is None:
        return []
    if not isinstance(values, list | tuple) or not all(isinstance(v, str) for v in values):
        raise ServiceError(_("%(field)s must be a list of words.") % {"field": name}, code="invalid")
    cleaned = list(dict.fromkeys(v.strip() for v in values if v.strip()))
    if len(cleaned) > MAX_LIST_ITEMS or any(len(v) > MAX_LIST_VALUE for v in cleaned):
        raise ServiceError(
            _("%(field)s: at most %(count)d values of up to %(length)d characters each.")
            % {"field": name, "count": MAX_LIST_ITEMS, "length": MAX_LIST_VALUE},
            code="invalid",
        )
    return cleaned


def validate(values: dict) -> dict:
    """Check and normalise an item's fields; raises ServiceError with a message for the user."""
    if not REPO_PATTERN.match(values["repo"]):
        raise ServiceError(
            _("A repository is written org/name with letters, digits, “.”, “_” or “-”, e.g. THUDM/chatglm3-6b."),
            code="invalid_repo",
        )
    if values["kind"] not in HubKind.values:
        raise ServiceError(_("The kind must be “model” or “dataset”."), code="invalid")
    if values["visibility"] not in HubVisibility.values:
        raise ServiceError(_("The visibility must be “public” or “private”."), code="invalid")
    for name in ("languages", "frameworks", "chips", "tags"):
        values[name] = _string_list(name, values.get(name))
    unknown = set(values["chips"]) - set(Backend.values)
    if unknown:
        raise ServiceError(
            _("Unknown chip families: %(chips)s (use npu, mlu, dcu or cuda).") % {"chips": ", ".join(sorted(unknown))},
            code="invalid",
        )
    return values


def _apply_card(values: dict) -> dict:
    front_matter, body = cards.split(values.get("card", ""))
    values = cards.fill_from_front_matter(values, cards.meta(front_matter))
    values["card_html"] = cards.render(body)
    return values


def index_document(item: HubItem) -> None:
    """Set the item's search columns from its fields (call before saving; ``search.sync`` after)."""
    names = catalog.task_names(item.task)
    item.search_text, item.facet_text = search.document(item, extra_words=names.values())


ITEM_FIELDS = (
    "kind",
    "summary",
    "summary_zh",
    "task",
    "licence",
    "library_name",
    "languages",
    "parameters_b",
    "size_bytes",
    "rows",
    "frameworks",
    "chips",
    "tags",
    "card",
    "card_html",
    "visibility",
)


@transaction.atomic
def save_item(*, repo: str, owner=None, files: list[tuple[str, int]] | None = None, **fields) -> HubItem:
    """Create or update the item ``repo`` for ``owner`` (None: the platform catalogue).

    The card's front matter fills empty filter fields, the body is rendered sanitised, the search columns are
    recomputed, and ``files`` (when given) replace the file list. A repository name belongs to whoever created
    it: someone else's name is a conflict. Raises ServiceError for bad input, writing nothing.
    """
    values = {"kind": HubKind.MODEL, "visibility": HubVisibility.PUBLIC, "repo": repo.strip()} | fields
    values = _apply_card(validate(values))
    item = HubItem.objects.select_for_update().filter(repo=values["repo"]).first()
    if item is None:
        item = HubItem(repo=values["repo"], owner=owner)
    elif item.owner_id != getattr(owner, "pk", None):
        raise Conflict(_("The repository name %(repo)s is already taken.") % {"repo": values["repo"]})
    for name in ITEM_FIELDS:
        if name in values:
            setattr(item, name, values[name])
    index_document(item)
    try:
        with transaction.atomic():
            item.save()
    except IntegrityError as exc:  # created by a concurrent request between our read and our insert
        raise Conflict(_("The repository name %(repo)s is already taken.") % {"repo": values["repo"]}) from exc
    if files is not None:
        _replace_files(item, files)
    search.sync([item.pk])
    return item


def save_catalog_item(**values) -> HubItem:
    """A platform catalogue item (no owner, public): what ``load_hub`` and the back office write."""
    return save_item(owner=None, visibility=HubVisibility.PUBLIC, **values)


@transaction.atomic
def replace_card(item: HubItem, card: str) -> HubItem:
    """Give ``item`` a new card, rendered sanitised and indexed; its other fields stay as they are."""
    _front_matter, body = cards.split(card)
    item.card, item.card_html = card, cards.render(body)
    index_document(item)
    item.save(update_fields=["card", "card_html", "search_text", "facet_text", "updated_at"])
    search.sync([item.pk])
    return item


def _replace_files(item: HubItem, files: list[tuple[str, int]]) -> None:
    paths = [path for path, _size in files]
    if len(set(paths)) != len(paths) or any(not p or p.startswith("/") or ".." in p.split("/") for p in paths):
        raise ServiceError(_("File paths must be unique, relative and inside the repository."), code="invalid_files")
    HubFile.objects.filter(item=item).delete()
    HubFile.objects.bulk_create(HubFile(item=item, path=path, size_bytes=int(size)) for path, size in files)


@transaction.atomic
def delete_item(user, repo: str) -> None:
    """Delete one of ``user``'s own items (platform items are removed in the back office)."""
    item = get_item(user, repo, action="delete")
    item_id, owner = item.pk, item.owner
    item.delete()
    search.sync([item_id])
    if owner is not None:
        from .repos import record_usage  # (repos builds on this module)

        record_usage(owner)  # its files no longer count in their storage


def like(user, item: HubItem) -> bool:
    """Like ``item`` once; True if this call added the like. The counter moves only when a row was written."""
    with transaction.atomic():
        try:
            with transaction.atomic():
                HubLike.objects.create(user=user, item=item)
        except IntegrityError:
            return False
        HubItem.objects.filter(pk=item.pk).update(likes_count=F("likes_count") + 1)
    return True


def unlike(user, item: HubItem) -> bool:
    """Remove the user's like; True if there was one."""
    with transaction.atomic():
        deleted, _rows = HubLike.objects.for_user(user).filter(item=item).delete()
        if deleted:
            HubItem.objects.filter(pk=item.pk, likes_count__gt=0).update(likes_count=F("likes_count") - 1)
    return bool(deleted)


def toggle_like(user, item: HubItem) -> bool:
    """Like or unlike; returns whether the user likes the item afterwards."""
    if like(user, item):
        return True
    unlike(user, item)
    return False


def refresh_counts(item: HubItem) -> HubItem:
    item.refresh_from_db(fields=["likes_count", "mount_count"])
    return item


def record_mount(item: HubItem) -> None:
    """Count one mount of ``item`` into an instance. The instances' mount code calls this when a mount is made;
    the count drives the "most mounted" order. Safe under concurrency (a single UPDATE)."""
    HubItem.objects.filter(pk=item.pk).update(mount_count=F("mount_count") + 1)
