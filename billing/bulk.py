"""Set-based writes for the thousands of rows a metering tick writes at once: insert, update and add to sums.

On PostgreSQL each is one statement over ``unnest`` of one array per column, its arrays sent as binary
parameters; elsewhere one ``executemany``. They skip what the ORM's bulk methods do per row and per field — build
a model instance for each entry, compile a ``CASE`` per field and row, prepare every value through its field —
which took most of a 100,000-session tick.
"""

from contextlib import contextmanager

import psycopg
from django.db import DEFAULT_DB_ALIAS, connection

from core.lookups import array_type

# The field types whose values psycopg sends as they are: on PostgreSQL Django's preparation of an int, an aware
# datetime, a date, a Decimal, a string or a UUID returns that same value, and calling it for each of millions of
# values cost seconds a tick. Anything else still goes through its field.
AS_IS = frozenset(
    {
        "AutoField",
        "BigAutoField",
        "BigIntegerField",
        "BooleanField",
        "CharField",
        "DateField",
        "DateTimeField",
        "DecimalField",
        "ForeignKey",
        "IntegerField",
        "PositiveIntegerField",
        "PositiveSmallIntegerField",
        "SmallIntegerField",
        "UUIDField",
    }
)


def _sent_as_is(field) -> bool:
    return connection.vendor == "postgresql" and field.get_internal_type() in AS_IS


def _columns(fields, rows) -> list[list]:
    """One list of prepared values per field, from ``rows`` of values in the fields' order."""
    columns = [list(column) for column in zip(*rows, strict=True)]
    for i, field in enumerate(fields):
        if not _sent_as_is(field):
            columns[i] = [field.get_db_prep_save(value, connection) for value in columns[i]]
    return columns


def _unnest(fields) -> str:
    return "unnest(" + ", ".join(f"%b::{array_type(f, connection)}" for f in fields) + ")"


@contextmanager
def _cursor():
    """A cursor of the connection that, on PostgreSQL, binds parameters on the server (``%b``: in binary).

    Django's PostgreSQL cursors bind on the client: every value of every array is quoted into the SQL text in
    Python, which cost more than the database's own work of a tick. This cursor shares the connection and its
    transaction, and goes through Django's cursor wrapper, so its statements are counted and logged like any.
    """
    if connection.vendor != "postgresql":
        with connection.cursor() as cursor:
            yield cursor
        return
    connection.ensure_connection()
    raw = psycopg.Cursor(connection.connection)
    cursor = connection.make_debug_cursor(raw) if connection.queries_logged else connection.make_cursor(raw)
    with cursor:
        yield cursor


def loaded(model, values: dict):
    """An instance of ``model`` for a row just written with ``values`` (every concrete field's attname), built by
    ``Model.from_db`` as the ORM builds a row it read."""
    names = [f.attname for f in model._meta.concrete_fields]
    if len(values) != len(names):
        raise ValueError(f"{model.__name__} needs a value for each of its fields")
    return model.from_db(DEFAULT_DB_ALIAS, names, [values[name] for name in names])  # the alias ``connection`` is


def instances(queryset) -> list:
    """The queryset's rows as instances built by :func:`loaded`: for the thousands of plain rows (no
    ``select_related``, no deferred fields) a metering tick reads and writes back."""
    model = queryset.model
    names = [f.attname for f in model._meta.concrete_fields]
    return [loaded(model, dict(zip(names, row, strict=True))) for row in queryset.values_list(*names)]


def bulk_set(model, objects, fields: list[str]) -> None:
    """``UPDATE … SET fields WHERE pk`` for many rows at once.

    Django's ``bulk_update`` builds a CASE expression per field and row; for the thousands of balances and
    sessions a metering tick writes, that compilation alone took seconds. On PostgreSQL this is one statement
    joining the table to ``unnest`` of one array per column; elsewhere one ``executemany``.
    """
    if not objects:
        return
    meta = model._meta
    columns = [meta.get_field(name) for name in fields] + [meta.pk]
    table, pk = connection.ops.quote_name(meta.db_table), connection.ops.quote_name(meta.pk.column)
    values = _columns(columns, ([getattr(obj, f.attname) for f in columns] for obj in objects))
    with _cursor() as cursor:
        if connection.vendor == "postgresql":
            names = [connection.ops.quote_name(f.column) for f in columns[:-1]]
            sql = (
                f"UPDATE {table} SET {', '.join(f'{n} = v.{n}' for n in names)} "
                f"FROM {_unnest(columns)} AS v({', '.join([*names, '_pk'])}) WHERE {table}.{pk} = v._pk"
            )
            cursor.execute(sql, values)
            return
        assignments = ", ".join(f"{connection.ops.quote_name(f.column)} = %s" for f in columns[:-1])
        cursor.executemany(f"UPDATE {table} SET {assignments} WHERE {pk} = %s", list(zip(*values, strict=True)))


def bulk_insert(
    model, fields: list[str], rows: list[tuple], *, returning: tuple[str, str] | None = None, skipping: str = ""
):
    """Insert many rows: on PostgreSQL one ``INSERT … SELECT`` from ``unnest`` of one array per column, elsewhere
    one ``executemany``. Not ``bulk_create``: it builds a model instance per row and prepares each value through
    its field. ``returning=(key, column)`` (PostgreSQL only) returns ``{key: column}`` of the new rows: a unique key,
    so that nothing rests on the order in which the database returns them. ``skipping`` (PostgreSQL only) names a
    unique field: a row whose value is already there is not inserted (and not returned)."""
    if not rows:
        return {}
    meta = model._meta
    columns = [meta.get_field(name) for name in fields]
    names = ", ".join(connection.ops.quote_name(f.column) for f in columns)
    table = connection.ops.quote_name(meta.db_table)
    values = _columns(columns, rows)
    with _cursor() as cursor:
        if connection.vendor == "postgresql":
            sql = f"INSERT INTO {table} ({names}) SELECT * FROM {_unnest(columns)}"
            if skipping:
                sql += f" ON CONFLICT ({connection.ops.quote_name(meta.get_field(skipping).column)}) DO NOTHING"
            if returning is None:
                cursor.execute(sql, values)
                return {}
            key, column = (connection.ops.quote_name(meta.get_field(name).column) for name in returning)
            cursor.execute(f"{sql} RETURNING {key}, {column}", values)
            return dict(cursor.fetchall())
        if returning is not None or skipping:
            raise NotImplementedError("bulk_insert returns keys and skips rows on PostgreSQL only")
        placeholders = ", ".join(["%s"] * len(columns))
        cursor.executemany(f"INSERT INTO {table} ({names}) VALUES ({placeholders})", list(zip(*values, strict=True)))
        return {}


def bulk_add(model, keys: list[str], sums: list[str], rows: list[tuple]) -> None:
    """Add ``sums`` to the rows whose ``keys`` are given, inserting the rows not there yet: ``INSERT … ON CONFLICT
    (keys) DO UPDATE`` that adds. ``rows`` are (keys…, sums…), one per key, in the order their locks are taken."""
    if not rows:
        return
    meta = model._meta
    columns = [meta.get_field(name) for name in [*keys, *sums]]
    table = connection.ops.quote_name(meta.db_table)
    names = [connection.ops.quote_name(f.column) for f in columns]
    adding = ", ".join(f"{n} = {table}.{n} + excluded.{n}" for n in names[len(keys) :])
    conflict = f"ON CONFLICT ({', '.join(names[: len(keys)])}) DO UPDATE SET {adding}"
    values = _columns(columns, rows)
    with _cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                f"INSERT INTO {table} ({', '.join(names)}) SELECT * FROM {_unnest(columns)} {conflict}", values
            )
            return
        placeholders = ", ".join(["%s"] * len(columns))
        cursor.executemany(
            f"INSERT INTO {table} ({', '.join(names)}) VALUES ({placeholders}) {conflict}",
            list(zip(*values, strict=True)),
        )
