"""The catalog models left for the catalog app: instances forget them and point at ``catalog.*``, in the state
only (the tables and their rows stay where they are)."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('billing', '0006_catalog_app'),
        ('catalog', '0001_initial'),
        ('console', '0004_catalog_app'),
        ('instances', '0006_instance_price_help'),
        ('storage', '0004_catalog_app'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.RemoveField(
                    model_name='node',
                    name='chip',
                ),
                migrations.RemoveField(
                    model_name='instancespec',
                    name='chip',
                ),
                migrations.AlterField(
                    model_name='instance',
                    name='chip',
                    field=models.ForeignKey(blank=True, help_text='Empty: no-card', null=True, on_delete=django.db.models.deletion.PROTECT, related_name='instances', to='catalog.chip'),
                ),
                migrations.RemoveField(
                    model_name='scalingfigure',
                    name='chip',
                ),
                migrations.AlterField(
                    model_name='instance',
                    name='spec',
                    field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='instances', to='catalog.instancespec'),
                ),
                migrations.RemoveField(
                    model_name='node',
                    name='zone',
                ),
                migrations.AlterField(
                    model_name='simulatedjob',
                    name='node',
                    field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='simulated_jobs', to='catalog.node'),
                ),
                migrations.AlterField(
                    model_name='instance',
                    name='node',
                    field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='instances', to='catalog.node'),
                ),
                migrations.RemoveField(
                    model_name='zone',
                    name='region',
                ),
                migrations.AlterField(
                    model_name='instance',
                    name='zone',
                    field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='instances', to='catalog.zone'),
                ),
                migrations.DeleteModel(
                    name='Chip',
                ),
                migrations.DeleteModel(
                    name='ScalingFigure',
                ),
                migrations.DeleteModel(
                    name='InstanceSpec',
                ),
                migrations.DeleteModel(
                    name='Node',
                ),
                migrations.DeleteModel(
                    name='Region',
                ),
                migrations.DeleteModel(
                    name='Zone',
                ),
            ],
        ),
    ]
