"""Databases of earlier releases on SQLite carry an index made outside the migrations (after every migrate) for the
statement page; the page now sorts its month's lines on both databases, so the index, and its write per line per
metering tick, goes."""

from django.db import migrations


def drop(apps, schema_editor):
    if schema_editor.connection.vendor == "sqlite":
        schema_editor.execute("DROP INDEX IF EXISTS spend_line_page_sqlite")


class Migration(migrations.Migration):
    dependencies = [("billing", "0017_transaction_minutes_signed")]

    operations = [migrations.RunPython(drop, migrations.RunPython.noop)]
