"""Inference templates left for the inference app: the marketplace forgets the model, in the state only (the table
and its rows stay where they are)."""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('inference', '0003_inference_templates'),
        ('marketplace', '0010_tiny_demo_framework'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.DeleteModel(
                    name='InferenceTemplate',
                ),
            ],
        ),
    ]
