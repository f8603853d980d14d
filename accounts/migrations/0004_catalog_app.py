"""Foreign keys to the catalog now name the catalog app (state only: the tables are the same)."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('catalog', '0001_initial'),
        ('console', '0003_staff_roles'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name='capacitysnapshot',
                    name='chip',
                    field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='catalog.chip'),
                ),
                migrations.AlterField(
                    model_name='capacitysnapshot',
                    name='zone',
                    field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='catalog.zone'),
                ),
            ],
        ),
    ]
