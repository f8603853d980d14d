"""``field__among=values``: membership in a long list of values, as one array parameter on PostgreSQL.

``field__in=values`` writes one placeholder per value: for the thousand keys a metering chunk looks up, the
statement's template is kilobytes long, too long for the driver's cache of parsed templates, and each value is
prepared through the lookup's machinery. ``field = ANY(%s::type[])`` has one placeholder, and the values are one
array of the column's own type. Elsewhere (SQLite), and for a subquery, it is ``IN``. Values are ids or other
column values (a model instance counts as its primary key). Registered for every field when the console app is
ready.
"""

from django.core.exceptions import EmptyResultSet
from django.db.models import Field, ForeignObject, Lookup, Model
from django.db.models.lookups import In


class Among(Lookup):
    lookup_name = "among"
    prepare_rhs = False

    def get_prep_lookup(self):
        # The values as they are when the filter is built (a generator is read once, a set may change later).
        if self.rhs_is_direct_value():
            return tuple(v.pk if isinstance(v, Model) else v for v in self.rhs)
        return super().get_prep_lookup()

    def as_sql(self, compiler, connection):
        if not self.rhs_is_direct_value():
            return compiler.compile(In(self.lhs, self.rhs))
        field = self.lhs.output_field
        fits = _range_check(field, connection)
        values = [v for v in dict.fromkeys(self.rhs) if v is not None and fits(v)]
        if not values:
            raise EmptyResultSet
        if connection.vendor != "postgresql":
            return compiler.compile(In(self.lhs, values))
        lhs, lhs_params = self.process_lhs(compiler, connection)
        prepared = [field.get_db_prep_value(v, connection, prepared=False) for v in values]
        # Cast to the column's own type: compared across types (bigint with the driver's smallint[]) the database
        # tests each row against the whole array instead of a hash of it.
        return f"{lhs} = ANY(%s::{array_type(field, connection)})", (*lhs_params, prepared)


def array_type(field, connection) -> str:
    """The PostgreSQL array type of ``field``'s values, without a size: a cast to ``numeric(14, 2)[]`` or
    ``varchar(n)[]`` would round or cut silently (Django's own UNNEST insert drops the size for the same reason)."""
    return field.db_type(connection).split("(")[0] + "[]"


def _range_check(field, connection):
    """A test of one value: an int outside the column's range matches nothing instead of failing the query.

    The range is looked up once per lookup, not once per value."""
    kind = getattr(field, "target_field", field).get_internal_type()
    try:
        low, high = connection.ops.integer_field_range(kind)
    except KeyError:
        return lambda value: True
    return lambda value: (
        not isinstance(value, int) or ((low is None or value >= low) and (high is None or value <= high))
    )


def register() -> None:
    Field.register_lookup(Among)
    ForeignObject.register_lookup(Among)  # a relation has lookups of its own
