"""Public pages as a visitor who is not logged in sees them: the same for everyone at the same address in the same
language, so each is rendered once and then served from the cache.

Only a page's bare address is kept (no query string): it is what most visitors open, and searches and filters, whose
values are any text a visitor types, would each take an entry in the cache that also holds the rate limits.

A page names what else its content is built from (``parts``: a price version, a programme's budget left…), and
whatever changes it without being named there calls :func:`bump` with the page's name (an image listed, an item
taken down); either is a new entry, so such a page is never stale. What a page cannot follow either way (a listing's
counts) it keeps for ``seconds`` at most.
"""

import hashlib
import uuid
from collections.abc import Callable
from typing import TypeVar

from django.core.cache import cache
from django.db import transaction
from django.utils.translation import get_language

from .htmx import wants_partial

T = TypeVar("T")


def content(request, name: str, build: Callable[[], tuple[str, int]], *, seconds: int, parts=()) -> tuple[str, int]:
    """(content, status) of the page ``name`` (or of pages at several addresses that change together, such as a
    list and its items' pages): ``build()``'s, or the one kept for this address, language, ``parts`` and generation
    of ``name``. Only a visitor's full page at its bare address, of status 200, is kept; a logged-in
    user's page, htmx fragments and addresses with a query string are always built."""
    if request.user.is_authenticated or wants_partial(request) or request.GET or request.method not in ("GET", "HEAD"):
        return build()
    name_of = repr((request.path, parts, generation(name)))
    key = f"visitor:{name}:{get_language()}:{hashlib.sha256(name_of.encode()).hexdigest()}"
    kept = cache.get(key)
    if kept is not None:
        return kept, 200
    html, status = build()
    if status == 200:
        cache.set(key, html, seconds)
    return html, status


def kept(name: str, build: Callable[[], T], *, seconds: int, parts=(), token: str | None = None) -> T:
    """``build()``'s value, or the one kept for the language, ``parts`` and generation of ``name``: what a page shows
    that is the same for every request with the same ``parts`` — a logged-in user's too, when ``parts`` name all
    that is theirs in it (a price book's ``state()``) — so it is read once per ``seconds`` at most and again as
    soon as ``bump(name)`` is called. What a page shows of the person alone is never kept here. ``token``: the
    generation, when the caller has read it already."""
    name_of = repr((parts, token or generation(name)))
    key = f"kept:{name}:{get_language()}:{hashlib.sha256(name_of.encode()).hexdigest()}"
    value = cache.get(key)
    if value is None:
        value = build()
        cache.set(key, value, seconds)
    return value


def generation(name: str) -> str:
    """A token that changes whenever ``bump(name)`` is called, so that a change the page is told of shows at once
    (within ``seconds`` where the cache is each process's own, as in the embedded default)."""
    key = f"visitor-generation:{name}"
    token = cache.get(key)
    if token is None:
        token = uuid.uuid4().hex
        cache.add(key, token, None)
        token = cache.get(key, token)
    return token


def bump(name: str) -> None:
    """A new generation of ``name`` now, and another once the caller's transaction commits: a visitor who asks in
    between, and is built the page as it was before the commit, keeps it under a generation that is already gone."""

    def new_generation():
        cache.set(f"visitor-generation:{name}", uuid.uuid4().hex, None)

    new_generation()
    transaction.on_commit(new_generation)
