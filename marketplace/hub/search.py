"""Hub search that works for Chinese and English, on SQLite and PostgreSQL, at 100,000 items and beyond.

Why segmenting in Python (see ``/work/shared/notes/chinese-search.md`` for the measurements): most Chinese words
are two characters (对话, 中文, 医疗), and neither SQLite's FTS5 tokenizers nor PostgreSQL's parser or pg_trgm
find them — a run of Han characters is one token to them, and trigram indexes need three characters. So, as
Lucene's CJK analyser does, we split every run of CJK characters into overlapping bigrams plus unigrams (no
dictionary to ship or keep up to date, and new words such as model names are found as well as old ones), and
keep Latin words and digits as lower-cased words. The tokens are stored space-separated in ``search_text``;
each database then indexes them with its own plain full-text index:

- PostgreSQL: a stored generated ``tsvector`` column (``to_tsvector('simple', search_text)``) with a GIN index.
  The ``simple`` configuration neither stems nor drops stop words, so our tokens are the lexemes.
- SQLite: an FTS5 table (``unicode61`` tokenizer, prefix indexes) keyed by the item's id.

A query is segmented the same way: a Chinese run becomes the bigrams that cover it (all required: 中文对话 →
中文 + 对话), a single character its unigram, and each Latin word a *prefix* term, so ``chatglm``, ``qwen 7b``
and the start of a repo name match.

Filters use the same machinery: each filter value becomes an opaque facet token (``chipx…``) in ``facet_text``,
indexed the same way in a separate column, so a user's words can never match a facet by accident and one index
lookup answers text and filters together. The migration ``0002_search_index`` creates both indexes; on
PostgreSQL the generated columns keep themselves in step, on SQLite :func:`sync` copies the rows into FTS5 and
the services call it whenever they write items.
"""

import hashlib
import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass, fields
from functools import lru_cache

from django.db import connection
from django.db.models import BooleanField, F, Func
from django.db.models.expressions import RawSQL
from django.db.models.lookups import In

FTS_TABLE = "marketplace_hubitem_fts"
MAX_QUERY_TERMS = 12
MAX_TOKEN_LENGTH = 40
# How much of a model card's body goes into the index: enough for its description, bounded for huge cards.
CARD_INDEX_CHARS = 4000

_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_RUNS = re.compile(rf"(?P<cjk>[{_CJK}]+)|(?P<word>[^\W_{_CJK}]+)")


@dataclass(frozen=True)
class Term:
    token: str
    prefix: bool


def _runs(text: str):
    normal = unicodedata.normalize("NFKC", text or "").casefold()
    for match in _RUNS.finditer(normal):
        yield match.lastgroup, match.group()[: MAX_TOKEN_LENGTH * 4]


def index_tokens(text: str) -> list[str]:
    """The tokens a document is indexed under: Latin words, and CJK unigrams plus overlapping bigrams."""
    tokens: dict[str, None] = {}
    for kind, run in _runs(text):
        if kind == "word":
            tokens[run[:MAX_TOKEN_LENGTH]] = None
            continue
        for i, char in enumerate(run):
            tokens[char] = None
            if i + 1 < len(run):
                tokens[run[i : i + 2]] = None
    return list(tokens)


def query_terms(text: str) -> list[Term]:
    """The terms of a user's query, all of which must match: CJK bigrams (or a lone unigram), Latin prefixes."""
    terms: dict[Term, None] = {}
    for kind, run in _runs(text):
        if kind == "word":
            terms[Term(run[:MAX_TOKEN_LENGTH], prefix=True)] = None
        elif len(run) == 1:
            terms[Term(run, prefix=False)] = None
        else:
            for start in _bigram_cover(len(run)):
                terms[Term(run[start : start + 2], prefix=False)] = None
    return list(terms)[:MAX_QUERY_TERMS]


def _bigram_cover(length: int) -> list[int]:
    """Starts of the fewest bigrams that cover a run: 中文对话 → 中文 + 对话 (not also 文对), 大模型 → 大模 + 模型.

    Without a dictionary we cannot tell where words end, so requiring every overlapping bigram would make
    中文对话 miss an item described as "中文 … 对话"; the bigrams' own two characters keep the match precise.
    """
    starts = list(range(0, length - 1, 2))
    if length % 2:
        starts.append(length - 2)
    return starts


@lru_cache(maxsize=8192)
def facet_token(field: str, value: str) -> str:
    """An opaque, case- and punctuation-insensitive token for a filter value ("Apache-2.0" = "apache 2.0")."""
    normal = "".join(ch for ch in unicodedata.normalize("NFKC", str(value)).casefold() if ch.isalnum())
    return f"{field}x{hashlib.blake2b(normal.encode(), digest_size=5).hexdigest()}"


# The filters a hub query takes, in the order pages and the API show them.
FACET_FIELDS = ("kind", "task", "licence", "language", "framework", "chip", "tag")


@dataclass(frozen=True)
class HubQuery:
    """A parsed hub search: free text plus optional filters (one value each)."""

    q: str = ""
    kind: str = ""
    task: str = ""
    licence: str = ""
    language: str = ""
    framework: str = ""
    chip: str = ""
    tag: str = ""

    def facets(self) -> list[str]:
        return [facet_token(name, getattr(self, name)) for name in FACET_FIELDS if getattr(self, name)]

    def as_params(self) -> dict[str, str]:
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name)}


def document(item, extra_words: Iterable[str] = ()) -> tuple[str, str]:
    """``(search_text, facet_text)`` for an item: what its words are indexed under and which filters it meets."""
    org, _, name = item.repo.partition("/")
    words = [item.repo, org, name, item.summary, item.summary_zh, item.task, item.licence, item.library_name]
    words += [*item.tags, *item.frameworks, *item.languages, *extra_words, (item.card or "")[:CARD_INDEX_CHARS]]
    search_text = " ".join(index_tokens(" ".join(w for w in words if w)))
    facets = [("kind", item.kind), ("task", item.task), ("licence", item.licence)]
    facets += [("language", v) for v in item.languages] + [("chip", v) for v in item.chips]
    facets += [("framework", v) for v in [*item.frameworks, item.library_name]] + [("tag", v) for v in item.tags]
    facet_text = " ".join(dict.fromkeys(facet_token(f, v) for f, v in facets if v))
    return search_text, facet_text


def apply(queryset, query: HubQuery, *, many_matches: bool = False):
    """Filter ``queryset`` (of hub items) by the query's text and facets with the database's full-text index.

    ``many_matches`` (SQLite only; see :func:`count_sqlite_matches`): the query matches more items than a page
    can sort cheaply, so the page is read by walking its sort order's index instead of from the matches.
    """
    terms = query_terms(query.q) if query.q.strip() else []
    if query.q.strip() and not terms:
        return queryset.none()  # only punctuation: nothing can match
    facets = query.facets()
    if not terms and not facets:
        return queryset
    if connection.vendor == "postgresql":
        return queryset.filter(_postgres_condition(terms, facets))
    matching_ids = RawSQL(f"SELECT rowid FROM {FTS_TABLE} WHERE {FTS_TABLE} MATCH %s", [_fts_match(terms, facets)])
    if not many_matches:
        return queryset.filter(id__in=matching_ids)
    # SQLite answers "id IN (matches)" through the primary key: it reads and sorts every match (most of 100,000
    # items for 模型) to return 20. ``+id`` takes that plan away, so it walks the sort order's index instead,
    # tests each id against the matches before reading the row, and stops at the page's last item — after a
    # few dozen entries when matches are plenty, as they are here.
    return queryset.filter(In(Func(F("id"), template="+%(expressions)s"), matching_ids))


def count_sqlite_matches(queryset, query: HubQuery, limit: int) -> int | None:
    """How many items of ``queryset`` match ``query`` on SQLite, counted up to ``limit``; None on PostgreSQL and
    when the query has neither words nor filters (the full-text index has no say then).

    The count streams the index's matches in a fixed join order and stops at ``limit``: "id IN (matches)" would
    first collect every match of a broad word into a list, which costs more than the count itself.
    """
    terms = query_terms(query.q) if query.q.strip() else []
    facets = query.facets()
    if connection.vendor != "sqlite" or not (terms or facets) or (query.q.strip() and not terms):
        return None
    items_sql, params = queryset.order_by().values("id").query.sql_with_params()
    sql = (
        f"SELECT COUNT(*) FROM (SELECT 1 FROM {FTS_TABLE} CROSS JOIN ({items_sql}) AS items "
        f"ON items.id = {FTS_TABLE}.rowid WHERE {FTS_TABLE} MATCH %s LIMIT %s)"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [*params, _fts_match(terms, facets), limit])
        return cursor.fetchone()[0]


def _postgres_condition(terms: list[Term], facets: list[str]) -> RawSQL:
    # Unqualified column names keep the condition valid when Django aliases the table inside a subquery.
    parts, params = [], []
    if terms:
        parts.append("search_vector @@ to_tsquery('simple', %s)")
        params.append(" & ".join(f"'{t.token}'" + (":*" if t.prefix else "") for t in terms))
    if facets:
        parts.append("facet_vector @@ to_tsquery('simple', %s)")
        params.append(" & ".join(f"'{f}'" for f in facets))
    return RawSQL(" AND ".join(parts), params, output_field=BooleanField())


def _fts_match(terms: list[Term], facets: list[str]) -> str:
    groups = []
    if terms:
        groups.append("search_text : (" + " AND ".join(f'"{t.token}"' + ("*" if t.prefix else "") for t in terms) + ")")
    if facets:
        groups.append("facet_text : (" + " AND ".join(f'"{f}"' for f in facets) + ")")
    return " AND ".join(groups)


def sync(item_ids: Iterable[int] | None = None) -> None:
    """Copy items' search columns into the SQLite FTS5 index (all items when ``item_ids`` is None).

    PostgreSQL needs nothing: its tsvector columns are generated from the row. Ids of deleted items may be
    passed; their index rows go away. An index row left behind by a delete elsewhere matches no item, because
    every search joins back to the items table, and SQLite never reuses those ids (AUTOINCREMENT).
    """
    if connection.vendor != "sqlite":
        return
    with connection.cursor() as cursor:
        if item_ids is None:
            cursor.execute(f"DELETE FROM {FTS_TABLE}")
            cursor.execute(
                f"INSERT INTO {FTS_TABLE}(rowid, search_text, facet_text) "
                "SELECT id, search_text, facet_text FROM marketplace_hubitem"
            )
            return
        ids = list(item_ids)
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            marks = ",".join(["%s"] * len(chunk))
            cursor.execute(f"DELETE FROM {FTS_TABLE} WHERE rowid IN ({marks})", chunk)
            cursor.execute(
                f"INSERT INTO {FTS_TABLE}(rowid, search_text, facet_text) "
                f"SELECT id, search_text, facet_text FROM marketplace_hubitem WHERE id IN ({marks})",
                chunk,
            )
