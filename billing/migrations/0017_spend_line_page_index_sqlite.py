"""On SQLite, an index that holds a statement page: a month's lines of a wallet in the page's order, with the sums.

SQLite sorted a month's lines for every page (a thousand lines: 0.5 ms) and read each line's row for the month's
totals; with this index the page is the index's first fifty entries and the totals one pass over it. On PostgreSQL
the lines' sums change on every metering tick, and an index holding them would take a write per line per tick (it
would also end the in-place updates those lines get), so it is made on SQLite, the embedded default, only.
"""

from django.db import migrations

NAME = "spend_line_page_sqlite"


def create(apps, schema_editor):
    if schema_editor.connection.vendor == "sqlite":
        schema_editor.execute(
            f"CREATE INDEX IF NOT EXISTS {NAME} ON billing_spendline "
            "(user_id, month, amount_fen, resource_id, kind, member_id, id, minutes, subsidy_fen)"
        )


def drop(apps, schema_editor):
    if schema_editor.connection.vendor == "sqlite":
        schema_editor.execute(f"DROP INDEX IF EXISTS {NAME}")


class Migration(migrations.Migration):
    dependencies = [("billing", "0016_usage_session_resource_index")]

    operations = [migrations.RunPython(create, drop, elidable=False)]
