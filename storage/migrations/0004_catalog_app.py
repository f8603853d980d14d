"""Foreign keys to the catalog now name the catalog app (state only: the tables are the same)."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('catalog', '0001_initial'),
        ('storage', '0003_disk_arrears_retention'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name='clouddisk',
                    name='zone',
                    field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='cloud_disks', to='catalog.zone'),
                ),
            ],
        ),
    ]
