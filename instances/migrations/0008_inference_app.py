"""The endpoint models left for the inference app: instances forget them, in the state only (the tables and their
rows stay where they are)."""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('instances', '0007_catalog_app'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.RemoveField(
                    model_name='endpointkey',
                    name='endpoint',
                ),
                migrations.RemoveField(
                    model_name='endpointrequest',
                    name='endpoint',
                ),
                migrations.RemoveField(
                    model_name='endpointrequest',
                    name='key',
                ),
                migrations.DeleteModel(
                    name='Endpoint',
                ),
                migrations.DeleteModel(
                    name='EndpointKey',
                ),
                migrations.DeleteModel(
                    name='EndpointRequest',
                ),
            ],
        ),
    ]
