"""The rows of a long list read as plain values, and built into models only for a row rendered afresh.

A list's rows are kept parts (``{% frame %}``) keyed by what they show. Read as models with their related rows,
fifty rows cost most of a list page, each model built field by field, although a kept row needs only its values
to be found. ``ValueRows`` reads the same columns as value tuples (a third of the cost): each ``Row`` is keyed by
its values, and builds its model, with the related rows it names cached on it as ``select_related`` caches them, only
when the template reads ``row.object`` — that is, when its kept part is missing. A column it was not given is
deferred, as with ``only()``: reading it runs a query of its own, which the pages' query counts catch.
"""

from collections.abc import Callable, Sequence

from django.db.models import QuerySet

from .paging import check_total_order
from .prepared import Prepared


class Row:
    """One row: ``key`` holds its values (what the kept part is keyed by), ``object`` the model built from them."""

    __slots__ = ("_build", "_object", "key")

    def __init__(self, key: tuple, build):
        self.key, self._build, self._object = key, build, None

    @property
    def object(self):
        if self._object is None:
            self._object = self._build(self.key)
        return self._object


class ValueRows:
    """``queryset`` read as the value tuples of ``fields``: the model's own fields and fields of the rows it points
    to (``chip__name``), one level deep. A paginator takes it as it is (its pages are lists of ``Row``); ``values``
    are the tuples themselves, for a paginator of its own (``rows()`` turns them into rows)."""

    def __init__(self, queryset: QuerySet, fields: Sequence[str]):
        self.model, self.db, self._queryset, self.ordered = queryset.model, queryset.db, queryset, queryset.ordered
        meta = self.model._meta
        own = ["pk"] + [name for name in fields if "__" not in name]
        related: dict[str, list[str]] = {}
        for name in fields:
            if "__" in name:
                relation, _, column = name.partition("__")
                if "__" in column:
                    raise ValueError(f"{name}: only the rows the model points to are read, one level deep")
                related.setdefault(relation, ["pk"]).append(column)
        self.columns = [*own, *(f"{relation}__{column}" for relation, columns in related.items() for column in columns)]
        self._values = queryset.values_list(*self.columns)
        at = {name: index for index, name in enumerate(self.columns)}
        self._own = self._plan(self.model, own, [at[name] for name in own])
        self._related = []
        for relation, columns in related.items():
            field = meta.get_field(relation)
            if not (field.concrete and (field.many_to_one or field.one_to_one)):
                raise ValueError(f"{relation}: only the rows the model points to are read, one level deep")
            indexes = [at[f"{relation}__{column}"] for column in columns]
            self._related.append((field, self._plan(field.related_model, columns, indexes), indexes[0]))

    @property
    def values(self) -> QuerySet:
        """The value tuples, a query not yet run (each use reads them afresh)."""
        return self._values.all()

    def count(self) -> int:
        """How many rows there are, counted without joining the rows they point to."""
        return self._queryset.count()

    def __len__(self) -> int:
        return self.count()

    def __getitem__(self, item: slice) -> list[Row]:
        """A slice of the rows (a page: a paginator takes ``ValueRows`` as it is)."""
        if not isinstance(item, slice):
            raise TypeError("ValueRows are read a slice at a time")
        return self.rows(self._values[item])

    def index(self, name: str) -> int:
        """Where column ``name`` is in a row's key."""
        return self.columns.index(name)

    def rows(self, values: Sequence[tuple]) -> list[Row]:
        return [Row(tuple(row), self._build) for row in values]

    @staticmethod
    def _plan(model, names: list[str], indexes: list[int]) -> tuple:
        """(model, attnames, indexes) in the order of the model's concrete fields, as ``from_db`` takes them."""
        meta = model._meta
        attnames = {
            (meta.pk if name == "pk" else meta.get_field(name)).attname: index
            for name, index in zip(names, indexes, strict=True)
        }
        ordered = [field.attname for field in meta.concrete_fields if field.attname in attnames]
        return model, ordered, [attnames[attname] for attname in ordered]

    def _build(self, key: tuple):
        model, attnames, indexes = self._own
        obj = model.from_db(self.db, attnames, [key[index] for index in indexes])
        for field, (model, attnames, indexes), pk_index in self._related:
            other = None if key[pk_index] is None else model.from_db(self.db, attnames, [key[i] for i in indexes])
            setattr(obj, field.attname, key[pk_index])
            field.set_cached_value(obj, other)
        return obj


class PreparedRows:
    """:class:`ValueRows` of a queryset whose SQL is built once per database (``console.prepared``): a list page
    built on every visit. ``LIST = PreparedRows(lambda account_id: …queryset…, fields, int)`` once, then
    ``LIST(account.pk)`` is what a paginator takes: it counts and reads a page as ``ValueRows`` would. With
    ``both_ends`` a page is read from the nearer end of the listing, as ``console.paging.BothEnds`` reads it."""

    def __init__(self, build: Callable[..., QuerySet], fields: Sequence[str], *kinds: type, both_ends: bool = False):
        self.build, self.fields, self.both_ends = build, tuple(fields), both_ends
        self.all = Prepared(build, *kinds)  # counted without the joins the values read
        self.values = Prepared(lambda *args: ValueRows(build(*args), self.fields).values, *kinds)
        self.reversed = Prepared(lambda *args: ValueRows(build(*args), self.fields).values.reverse(), *kinds)
        self._shape: ValueRows | None = None

    def __call__(self, *args) -> "BoundRows":
        if self._shape is None:
            # How a row is read and built depends on the model and the fields, not on the arguments.
            self._shape = ValueRows(self.build(*args), self.fields)
            if self.both_ends:
                check_total_order(self._shape._queryset)
        bound = self.values.bind(*args, counted=self.all, reversed=self.reversed if self.both_ends else None)
        return BoundRows(bound, self._shape)

    def head(self, limit: int, *args) -> list[Row]:
        """The first ``limit`` rows for ``args``, not counted (the latest few a page shows)."""
        return self(*args).shape.rows(self.values.window(*args, offset=0, limit=limit))


class BoundRows:
    """The rows of one :class:`PreparedRows` call: ``count()`` and slices, as a paginator asks for them."""

    def __init__(self, bound, shape: ValueRows):
        self.bound, self.shape, self.ordered = bound, shape, shape.ordered

    def count(self) -> int:
        return self.bound.count()

    def __len__(self) -> int:
        return self.bound.count()

    def __getitem__(self, item: slice) -> list[Row]:
        return self.shape.rows(self.bound[item])

    def index(self, name: str) -> int:
        return self.shape.index(name)
