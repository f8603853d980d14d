"""Inference templates move here from the marketplace app: in the migration state only. Their table keeps its name
(``marketplace_inferencetemplate``), so no row moves; the content type follows it (admin history and permissions)."""

import django.core.validators
import django.db.models.deletion
import uuid
from django.db import migrations, models


def _relabel(apps, old, new):
    """The old label's content type (with its permissions, their grants and the admin history) takes the new label;
    a stub made under the new label before this ran (nothing points at it yet) makes way for it."""
    ContentType = apps.get_model("contenttypes", "ContentType")
    if ContentType.objects.filter(app_label=old, model="inferencetemplate").exists():
        ContentType.objects.filter(app_label=new, model="inferencetemplate").delete()
        ContentType.objects.filter(app_label=old, model="inferencetemplate").update(app_label=new)


def move_content_type(apps, schema_editor):
    _relabel(apps, "marketplace", "inference")


def move_content_type_back(apps, schema_editor):
    _relabel(apps, "inference", "marketplace")


class Migration(migrations.Migration):

    dependencies = [
        ('inference', '0002_endpoint_key_made_by'),
        ('marketplace', '0010_tiny_demo_framework'),
        ('contenttypes', '0002_remove_content_type_name'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name='InferenceTemplate',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('public_id', models.UUIDField(default=uuid.uuid4, editable=False, unique=True)),
                        ('slug', models.CharField(max_length=64, unique=True, validators=[django.core.validators.RegexValidator('^[a-z0-9](?:[a-z0-9._-]*[a-z0-9])?$', 'Use lower-case letters, digits, “.”, “_” and “-”.')], verbose_name='slug')),
                        ('framework', models.CharField(choices=[('vllm', 'vLLM'), ('mindformers', 'MindFormers'), ('tensorrt-llm', 'TensorRT-LLM'), ('magicmind', 'MagicMind'), ('tiny-lm', 'tiny demo server (CPU)')], max_length=16, verbose_name='serving framework')),
                        ('chips', models.JSONField(blank=True, default=list, help_text='Chip slugs it fits on; empty: every chip of the family.', verbose_name='chips')),
                        ('cards', models.PositiveSmallIntegerField(default=1, verbose_name='default cards')),
                        ('arguments', models.CharField(blank=True, max_length=500, verbose_name='serving arguments')),
                        ('active', models.BooleanField(default=True, verbose_name='active')),
                        ('sort_order', models.PositiveSmallIntegerField(default=100)),
                        ('model', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='inference_templates', to='marketplace.hubitem', verbose_name='model')),
                        ('variant', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='inference_templates', to='marketplace.imagevariant', verbose_name='image variant')),
                    ],
                    options={
                        'verbose_name': 'inference template',
                        'verbose_name_plural': 'inference templates',
                        'db_table': 'marketplace_inferencetemplate',
                        'ordering': ['sort_order', 'slug'],
                    },
                ),
                migrations.AlterField(
                    model_name='endpoint',
                    name='template',
                    field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='endpoints', to='inference.inferencetemplate', verbose_name='template'),
                ),
            ],
        ),
        migrations.RunPython(move_content_type, move_content_type_back),
    ]
