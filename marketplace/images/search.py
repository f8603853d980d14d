"""Image search in Chinese and English, and the filters, with the hub's segmentation.

The text is segmented exactly as the hub does it (``marketplace.hub.search``: Latin words, CJK unigrams and
overlapping bigrams) and the tokens are stored space-separated in ``Image.search_text``; filter values become the
hub's opaque facet tokens in ``facet_text``. Unlike the hub, which must stay fast at 100,000 items and therefore
asks a full-text index (FTS5, tsvector), the marketplace holds hundreds of images: a ``LIKE`` per term over the
token column of the listed rows costs well under a millisecond there, works the same on SQLite and PostgreSQL,
and needs no index to keep in step. Should the catalogue ever grow to tens of thousands, move it to the hub's
index migration unchanged — the columns already hold what the index needs.

Tokens are delimited by spaces at both ends of the column, so a CJK term matches a whole token (`` 中文 ``) and
a Latin term matches a token's start (`` chat``), as the hub's prefix queries do.
"""

from dataclasses import dataclass, fields

from django.db.models import Q

from ..hub.search import facet_token, index_tokens, query_terms


@dataclass(frozen=True)
class ImageQuery:
    """A parsed marketplace search: free text plus optional filters (one value each). ``chip`` is a chip slug,
    resolved to its family by the service before filtering."""

    q: str = ""
    category: str = ""
    family: str = ""
    framework: str = ""
    os: str = ""
    tag: str = ""

    def as_params(self) -> dict[str, str]:
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name)}


def framework_name(version: str) -> str:
    """“MindSpore 2.3” → “MindSpore”: filters match a framework whatever its version."""
    words = version.split()
    while len(words) > 1 and any(ch.isdigit() for ch in words[-1]):
        words.pop()
    return " ".join(words)


def os_family(os_name: str) -> str:
    """“openEuler 22.03” → “openeuler”."""
    return (os_name.split() or [""])[0].casefold()


def document(image, variants) -> tuple[str, str]:
    """``(search_text, facet_text)`` for an image and its variants, each padded with a space at both ends."""
    words = [image.slug, image.name, image.name_zh, image.summary, image.summary_zh, image.publisher]
    words += [*image.tags, *image.frameworks, image.description[:4000], image.description_zh[:4000]]
    for variant in variants:
        words += [variant.os, *variant.stack, variant.family]
    tokens = index_tokens(" ".join(w for w in words if w))
    facets = [("category", image.category)] + [("tag", t) for t in image.tags]
    facets += [("framework", framework_name(f)) for f in image.frameworks]
    for variant in variants:
        facets += [("family", variant.family or "cpu"), ("os", os_family(variant.os))]
        facets += [("framework", framework_name(s)) for s in variant.stack]
    facet_text = " ".join(dict.fromkeys(facet_token(f, v) for f, v in facets if v))
    return f" {' '.join(tokens)} ", f" {facet_text} "


def apply(queryset, query: ImageQuery):
    """Images of ``queryset`` that match every word and every filter of ``query``."""
    condition = Q()
    if query.q.strip():
        terms = query_terms(query.q)
        if not terms:
            return queryset.none()  # only punctuation: nothing can match
        for term in terms:
            needle = f" {term.token}" if term.prefix else f" {term.token} "
            condition &= Q(search_text__contains=needle)
    for name in ("category", "family", "framework", "os", "tag"):
        value = getattr(query, name)
        if value:
            value = os_family(value) if name == "os" else value
            condition &= Q(facet_text__contains=f" {facet_token(name, value)} ")
    return queryset.filter(condition)
