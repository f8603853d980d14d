"""``field__among=values``: membership in a long list of values, as one array parameter on PostgreSQL.

``field__in=values`` writes one placeholder per value: for the thousand keys a metering chunk looks up, the
statement is kilobytes long, too long for the driver's cache of parsed statements, and each value is prepared
through the lookup's machinery. ``field = ANY(%s)`` sends the values as one array: the statement stays short and
is parsed once. Elsewhere (SQLite) it is ``IN``. Registered for every field when the console app is ready.
"""

from django.core.exceptions import EmptyResultSet
from django.db.models import Field, ForeignObject, Lookup
from django.db.models.lookups import In


class Among(Lookup):
    lookup_name = "among"
    prepare_rhs = False

    def as_sql(self, compiler, connection):
        if connection.vendor != "postgresql":
            return compiler.compile(In(self.lhs, self.rhs))
        values = list(dict.fromkeys(v for v in self.rhs if v is not None))
        if not values:
            raise EmptyResultSet
        lhs, lhs_params = self.process_lhs(compiler, connection)
        field = self.lhs.output_field
        prepared = [field.get_db_prep_value(v, connection, prepared=False) for v in values]
        # Cast to the column's own type: compared across types (bigint with the driver's smallint[]) the database
        # tests each row against the whole array instead of a hash of it.
        array_type = field.db_type(connection).split("(")[0]
        return f"{lhs} = ANY(%s::{array_type}[])", (*lhs_params, prepared)


def register() -> None:
    Field.register_lookup(Among)
    ForeignObject.register_lookup(Among)  # a relation has lookups of its own
