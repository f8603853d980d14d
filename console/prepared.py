"""Queries whose SQL is built once per database and then run with each call's arguments.

Django builds a queryset's SQL afresh every time it runs: the filters resolved against the model, the columns, the
joins and the ordering compiled. For the small queries a page runs on every request (the session, the user, a
wallet's figures) that costs 0.15–0.5 ms each, several times what SQLite or PostgreSQL then take to answer. A
:class:`Prepared` query is defined by a function of its arguments that returns a queryset; it is built once per
database with marker arguments, the positions the markers reach in the SQL's parameters are noted, and each call
runs that SQL with the call's own arguments. The rows go through Django's own iterable for the queryset (models,
``values()`` dicts or ``values_list()`` tuples, with the field converters and ``select_related`` objects), and
``prefetch_related`` runs as usual. A query also reads a window of its rows (its ``LIMIT``/``OFFSET`` written in
per call) and its count (``SELECT COUNT(*)`` with the same ``WHERE``), so a paginator's two queries are built once
too. SQLAlchemy keeps compiled statements the same way.

What a query depends on must be one of its arguments: anything else the function reads (the time, a setting, a
default language) is frozen into the SQL the first time it runs. Arguments are ints, strings, aware datetimes, dates or
UUIDs; each must reach the SQL as a parameter of its own (not inside a ``__contains`` pattern, a list or a slice),
else the first call raises :class:`ImproperlyConfigured`, as it does for an int argument that goes to a column
narrower than 64 bits. The SQL is built per time zone (a date lookup names it among its parameters). A changed
setting (``override_settings`` in tests) drops what was built.
"""

import threading
import uuid
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from functools import cached_property

from django.core.exceptions import EmptyResultSet, FullResultSet, ImproperlyConfigured
from django.core.signals import setting_changed
from django.db import DEFAULT_DB_ALIAS, connections, models
from django.db.models import Count, QuerySet
from django.db.models.query import prefetch_related_objects
from django.utils import timezone

from .paging import read_nearer_end

# Django prepares each kind of argument for the database as these fields do (a datetime becomes text on SQLite).
_FIELDS = {datetime: models.DateTimeField(), date: models.DateField(), uuid.UUID: models.UUIDField()}
KINDS = (int, str, datetime, date, uuid.UUID)


def _marker(kind: type, i: int):
    """The ``i``-th argument's stand-in while the SQL is built: a value no query holds as a constant."""
    if kind is int:
        return -(2**53) - 7919 * (i + 1)
    if kind is str:
        # With the characters a pattern lookup escapes (``iexact`` on SQLite is a LIKE): escaped, it would no
        # longer match, and the query is refused rather than given a user's % or _ as a wildcard.
        return f"prepared%_\\marker-{i}-{uuid.uuid4().hex}"
    if kind is datetime:
        return datetime(1901, 2, 3, 4, 5, 6, 1000 + i, tzinfo=UTC)
    if kind is date:
        return date(1901, 3, 5) + timedelta(days=7 * i)
    return uuid.UUID(int=(2**127) + 7919 * (i + 1))


class _NoRows(Exception):
    """An argument no row can match (an integer past 64 bits): the query answers nothing, as Django's does."""


def _prepare(kind: type, value, connection):
    if kind is int:
        value = int(value)
        if not -(2**63) <= value < 2**63:
            raise _NoRows
        return value
    if kind is str:
        return str(value)
    return _FIELDS[kind].get_db_prep_value(value, connection, prepared=False)


def _shallow(obj):
    """A copy sharing ``obj``'s attributes. Not ``copy.copy``: pickling support makes a queryset run itself."""
    clone = object.__new__(type(obj))
    clone.__dict__.update(obj.__dict__)
    return clone


class _Built:
    """One database's SQL for the query, with where each argument goes among its parameters."""

    def __init__(self, queryset: QuerySet, sql: str, params: tuple, slots: list[tuple[int, int]], compiler):
        self.queryset, self.sql, self.params, self.slots, self.compiler = queryset, sql, params, slots, compiler


# A window's bounds while its SQL is built: both databases write them into the SQL as ``LIMIT n OFFSET m``.
_LIMIT, _OFFSET = 987_654_319, 876_543_211
_WINDOW = f"LIMIT {_LIMIT} OFFSET {_OFFSET}"
ROWS, WINDOW, COUNT = "rows", "window", "count"


class Prepared:
    """``Prepared(lambda user_id: Model.objects.filter(owner_id=user_id), int)``: ``query(7)`` is the list of rows
    the queryset built with ``7`` would give, ``query.window(7, offset=100, limit=50)`` its slice ``[100:150]``
    and ``query.count(7)`` its ``count()``."""

    def __init__(self, build: Callable[..., QuerySet], *kinds: type):
        unknown = [k for k in kinds if k not in KINDS]
        if unknown:
            raise ImproperlyConfigured(f"Prepared arguments are {KINDS}, not {unknown}")
        self.build, self.kinds = build, kinds
        self._built: dict[tuple[str, str], _Built] = {}
        self._lock = threading.Lock()
        _every.append(self)

    def __call__(self, *args, using: str = DEFAULT_DB_ALIAS) -> list:
        try:
            return self._rows(self._get(using, ROWS), args, using)
        except _NoRows:
            return []

    def first(self, *args, using: str = DEFAULT_DB_ALIAS):
        """The first row, or None (the queryset should be sliced to one row)."""
        rows = self(*args, using=using)
        return rows[0] if rows else None

    def window(self, *args, offset: int, limit: int, using: str = DEFAULT_DB_ALIAS) -> list:
        """The rows ``[offset:offset + limit]``."""
        offset, limit = int(offset), int(limit)
        if offset < 0 or limit < 0:
            raise ValueError("a window starts and ends at or after the first row")
        if limit == 0:
            return []
        try:
            return self._rows(self._get(using, WINDOW), args, using, f"LIMIT {limit} OFFSET {offset}")
        except _NoRows:
            return []

    def bind(self, *args, using: str = DEFAULT_DB_ALIAS, counted=None, reversed=None, total=None) -> "Bound":
        """The rows for ``args`` as a paginator takes them: counted once (by ``counted``, another prepared query
        of the same rows, when given; not at all when the caller already knows their ``total``), then read a window
        at a time; with ``reversed`` (the same query in the reverse order) from the nearer end of the listing."""
        bound = Bound(self, args, using, counted or self, reversed)
        if total is not None:
            bound.total = total
        return bound

    def count(self, *args, using: str = DEFAULT_DB_ALIAS) -> int:
        built = self._get(using, COUNT)
        try:
            params = self._params(built, args, connections[using])
        except _NoRows:
            return 0
        with connections[using].cursor() as cursor:
            cursor.execute(built.sql, params)
            return cursor.fetchone()[0]

    def _params(self, built: _Built, args: tuple, connection) -> tuple:
        if len(args) != len(self.kinds):
            raise TypeError(f"this query takes {len(self.kinds)} arguments, not {len(args)}")
        params = list(built.params)
        for position, i in built.slots:
            params[position] = _prepare(self.kinds[i], args[i], connection)
        return tuple(params)

    def _rows(self, built: _Built, args: tuple, using: str, window: str = "") -> list:
        connection = connections[using]
        params = self._params(built, args, connection)
        sql = built.sql.replace(_WINDOW, window) if window else built.sql
        compiler = _shallow(built.compiler)
        compiler.connection = connection  # this thread's connection, not the one the SQL was built on
        compiler.as_sql = lambda *a, **kw: (sql, params)
        query = _shallow(built.queryset.query)
        query.get_compiler = lambda *a, **kw: compiler
        queryset = _shallow(built.queryset)
        queryset._query, queryset._result_cache = query, None  # not .query: its setter resets the row kind
        rows = list(queryset._iterable_class(queryset))
        if queryset._prefetch_related_lookups and rows:
            prefetch_related_objects(rows, *queryset._prefetch_related_lookups)
        return rows

    def _get(self, using: str, form: str) -> _Built:
        # The current time zone is part of the key: a date lookup or truncation writes its name among the SQL's
        # parameters.
        key = (using, form, timezone.get_current_timezone_name())
        return self._built.get(key) or self._build(key)

    def _build(self, key: tuple[str, str, str]) -> _Built:
        using, form, _zone = key
        with self._lock:
            if key in self._built:
                return self._built[key]
            connection = connections[using]
            markers = [_marker(kind, i) for i, kind in enumerate(self.kinds)]
            queryset = self.build(*markers).using(using)
            compiler = None
            if form == COUNT:
                try:
                    sql, params = _count_sql(queryset, using)
                except (EmptyResultSet, FullResultSet) as exc:
                    raise ImproperlyConfigured("a prepared query's int arguments must go to 64-bit columns") from exc
            else:
                if form == WINDOW:
                    if queryset.query.is_sliced:
                        raise ImproperlyConfigured("a prepared window needs a query that is not sliced already")
                    queryset = queryset[_OFFSET : _OFFSET + _LIMIT]
                compiler = queryset.query.get_compiler(using=using)
                try:
                    sql, params = compiler.as_sql()
                except (EmptyResultSet, FullResultSet) as exc:
                    # A marker outside a field's range (an int past 32 bits for an IntegerField on PostgreSQL)
                    # drops the condition it is in.
                    raise ImproperlyConfigured("a prepared query's int arguments must go to 64-bit columns") from exc
                compiler = _shallow(compiler)
                compiler.connection = None  # each call gives its own thread's connection; this one is let go
                if form == WINDOW and sql.count(_WINDOW) != 1:
                    raise ImproperlyConfigured(f"the SQL of a prepared window does not end with {_WINDOW}")
            wanted = [_prepare(kind, m, connection) for kind, m in zip(self.kinds, markers, strict=True)]
            slots = [
                (pos, i) for pos, p in enumerate(params) for i, w in enumerate(wanted) if type(p) is type(w) and p == w
            ]
            missing = set(range(len(wanted))) - {i for _pos, i in slots}
            if missing:
                raise ImproperlyConfigured(
                    f"argument(s) {sorted(missing)} of a prepared query do not reach its SQL as parameters"
                )
            self._built[key] = built = _Built(queryset, sql, tuple(params), slots, compiler)
            return built


class Bound:
    """A :class:`Prepared` query's rows for some arguments, for a paginator: ``count()`` and slices."""

    def __init__(self, prepared: Prepared, args: tuple, using: str, counted: Prepared, reversed: Prepared | None):
        self.prepared, self.args, self.using, self.counted, self.reversed = prepared, args, using, counted, reversed

    @property
    def ordered(self) -> bool:
        return self.prepared._get(self.using, WINDOW).queryset.ordered

    @cached_property
    def total(self) -> int:
        return self.counted.count(*self.args, using=self.using)

    def count(self) -> int:
        return self.total

    def __len__(self) -> int:
        return self.total

    def __getitem__(self, item: slice) -> list:
        def reader(query):
            return lambda start, stop: query.window(*self.args, offset=start, limit=stop - start, using=self.using)

        return read_nearer_end(item, self.total, reader(self.prepared), self.reversed and reader(self.reversed))


def _count_sql(queryset: QuerySet, using: str) -> tuple[str, tuple]:
    """``SELECT COUNT(*) … WHERE …`` of ``queryset``: as Django counts a queryset that is not sliced, distinct,
    grouped or annotated (those it counts over a subquery, which is not built here)."""
    query = queryset.query
    if query.is_sliced or query.distinct or query.group_by or query.combinator or query.annotations:
        raise ImproperlyConfigured("a prepared count needs a plain filtered queryset")
    query = query.chain()
    query.clear_ordering(force=True)
    query.clear_select_clause()
    query.select_related = False
    query.add_annotation(Count("*"), alias="__count", select=True)
    return query.get_compiler(using=using).as_sql()


_every: list[Prepared] = []


def _forget(**kwargs) -> None:
    for query in _every:
        with query._lock:
            query._built.clear()


setting_changed.connect(_forget, dispatch_uid="console_prepared_forget")
