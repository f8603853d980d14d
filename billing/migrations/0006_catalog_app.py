"""Foreign keys to the catalog now name the catalog app (state only: the tables are the same)."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('billing', '0005_instance_notifications'),
        ('catalog', '0001_initial'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name='price',
                    name='chip',
                    field=models.ForeignKey(blank=True, help_text='Empty: the CPU-only no-card mode.', null=True, on_delete=django.db.models.deletion.PROTECT, related_name='prices', to='catalog.chip'),
                ),
                migrations.AlterField(
                    model_name='subsidyprogramme',
                    name='chips',
                    field=models.ManyToManyField(blank=True, help_text='Empty: every chip.', related_name='subsidy_programmes', to='catalog.chip'),
                ),
                migrations.AlterField(
                    model_name='subsidyprogramme',
                    name='zones',
                    field=models.ManyToManyField(blank=True, help_text='Empty: every zone.', related_name='subsidy_programmes', to='catalog.zone'),
                ),
            ],
        ),
    ]
