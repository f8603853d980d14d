"""The ledger's foreign keys lose their own indexes: each is served by another index (see the models).

Only the indexes are dropped: Django's AlterField would also drop and re-add each foreign key constraint,
re-checking it against every row of the ledger under lock. The index names are Django's, the same on
PostgreSQL and SQLite.
"""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


DROPPED = [
    ("billing_ledgerentry", "billing_ledgerentry_account_id_ac8d6a24", "account_id"),
    ("billing_ledgertransaction", "billing_ledgertransaction_created_by_id_f4941764", "created_by_id"),
    ("billing_ledgertransaction", "billing_ledgertransaction_member_id_5f6b7580", "member_id"),
    ("billing_ledgertransaction", "billing_ledgertransaction_topup_id_8050ea82", "topup_id"),
    ("billing_ledgertransaction", "billing_ledgertransaction_user_id_1a490c81", "user_id"),
]


class Migration(migrations.Migration):

    dependencies = [
        ('billing', '0013_price_book_version'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name='ledgerentry',
                    name='account',
                    field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.PROTECT, related_name='entries', to='billing.account'),
                ),
                migrations.AlterField(
                    model_name='ledgertransaction',
                    name='created_by',
                    field=models.ForeignKey(blank=True, db_index=False, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to=settings.AUTH_USER_MODEL),
                ),
                migrations.AlterField(
                    model_name='ledgertransaction',
                    name='member',
                    field=models.ForeignKey(blank=True, db_index=False, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL, verbose_name='team member'),
                ),
                migrations.AlterField(
                    model_name='ledgertransaction',
                    name='topup',
                    field=models.ForeignKey(blank=True, db_index=False, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='transactions', to='billing.topup'),
                ),
                migrations.AlterField(
                    model_name='ledgertransaction',
                    name='user',
                    field=models.ForeignKey(blank=True, db_index=False, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='ledger_transactions', to=settings.AUTH_USER_MODEL),
                ),
            ],
            database_operations=[
                migrations.RunSQL(f"DROP INDEX IF EXISTS {name}", reverse_sql=f"CREATE INDEX {name} ON {table} ({column})")
                for table, name, column in DROPPED
            ],
        ),
        migrations.AddIndex(
            model_name='ledgertransaction',
            index=models.Index(condition=models.Q(('topup__isnull', False)), fields=['topup'], name='ledger_topup'),
        ),
        migrations.AddIndex(
            model_name='ledgertransaction',
            index=models.Index(condition=models.Q(('created_by__isnull', False)), fields=['created_by'], name='ledger_created_by'),
        ),
        migrations.AddIndex(
            model_name='ledgertransaction',
            index=models.Index(condition=models.Q(('member__isnull', False)), fields=['member'], name='ledger_member'),
        ),
    ]
