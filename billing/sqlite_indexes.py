"""An index SQLite has and PostgreSQL does not: a statement page's lines, in the page's order, with their sums.

SQLite sorted a month's lines for every statement page (a thousand lines: half a millisecond) and read each line's
row for the month's totals; with this index a page is the index's first fifty entries and the totals one pass over
it. On PostgreSQL, what production runs, the lines' sums change on every metering tick, and an index holding them
would take a write per line per tick; there a page sorts its month's lines instead.

Django's models cannot declare an index for one database, so it is made after every ``migrate`` (``post_migrate``),
which also makes it again when a migration has rebuilt the table (SQLite rebuilds a table to alter a column).
"""

from django.db import connections

NAME = "spend_line_page_sqlite"
SQL = (
    f"CREATE INDEX IF NOT EXISTS {NAME} ON billing_spendline "
    "(user_id, month, amount_fen, resource_id, kind, member_id, id, minutes, subsidy_fen)"
)


def make(using: str = "default", **_kwargs) -> None:
    connection = connections[using]
    if connection.vendor != "sqlite":
        return
    with connection.cursor() as cursor:
        if "billing_spendline" in connection.introspection.table_names(cursor):
            cursor.execute(SQL)
