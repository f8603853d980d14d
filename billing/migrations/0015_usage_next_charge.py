"""When the metering tick next looks at a session (empty: at the next tick, so nothing is left unbilled), and room
on each PostgreSQL page of sessions for the tick's updates to stay on their page without touching any index."""

from django.db import migrations, models


def _fillfactor(value):
    def apply(apps, schema_editor):
        if schema_editor.connection.vendor == "postgresql":
            schema_editor.execute(f"ALTER TABLE billing_usagesession SET (fillfactor = {value})")

    return apply


class Migration(migrations.Migration):
    dependencies = [
        ("billing", "0014_ledger_indexes_for_writes"),
    ]

    operations = [
        migrations.AddField(
            model_name="usagesession",
            name="charge_due_at",
            field=models.DateTimeField(blank=True, editable=False, null=True, verbose_name="next charge"),
        ),
        # Every tick rewrites each open session's charged amounts and schedule; none of those columns is indexed,
        # so with free room on the page PostgreSQL updates the row in place (a HOT update) instead of adding an
        # entry to each of the table's indexes.
        migrations.RunPython(_fillfactor(70), _fillfactor(100)),
    ]
