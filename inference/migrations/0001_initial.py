"""Inference endpoints move here from the instances app: in the migration state only. Their tables keep their
names (``instances_endpoint``…), so no row moves; the content types follow them (admin history and permissions)."""

import django.db.models.deletion
import uuid
from django.db import migrations, models


MOVED = ["endpoint", "endpointkey", "endpointrequest"]


def _relabel(apps, old, new):
    ContentType = apps.get_model("contenttypes", "ContentType")
    for model in MOVED:
        if ContentType.objects.filter(app_label=new, model=model).exists():
            ContentType.objects.filter(app_label=old, model=model).delete()
        else:
            ContentType.objects.filter(app_label=old, model=model).update(app_label=new)


def move_content_types(apps, schema_editor):
    _relabel(apps, "instances", "inference")


def move_content_types_back(apps, schema_editor):
    _relabel(apps, "inference", "instances")


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ('instances', '0008_inference_app'),
        ('marketplace', '0005_image_description_zh'),
        ('contenttypes', '0002_remove_content_type_name'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name='Endpoint',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('public_id', models.UUIDField(default=uuid.uuid4, editable=False, unique=True)),
                        ('served_model', models.CharField(help_text='What clients pass as “model”.', max_length=100, verbose_name='model name')),
                        ('idle_stop_minutes', models.PositiveIntegerField(blank=True, help_text='Empty: keep running.', null=True, verbose_name='scale to zero after idle minutes')),
                        ('last_request_at', models.DateTimeField(blank=True, null=True, verbose_name='last request')),
                        ('created_at', models.DateTimeField(auto_now_add=True, verbose_name='created')),
                        ('instance', models.OneToOneField(on_delete=django.db.models.deletion.PROTECT, related_name='endpoint', to='instances.instance')),
                        ('template', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='endpoints', to='marketplace.inferencetemplate', verbose_name='template')),
                    ],
                    options={
                        'verbose_name': 'inference endpoint',
                        'verbose_name_plural': 'inference endpoints',
                        'db_table': 'instances_endpoint',
                        'ordering': ['-created_at', '-id'],
                    },
                ),
                migrations.CreateModel(
                    name='EndpointKey',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('public_id', models.UUIDField(default=uuid.uuid4, editable=False, unique=True)),
                        ('name', models.CharField(max_length=64, verbose_name='name')),
                        ('prefix', models.CharField(editable=False, max_length=16, unique=True)),
                        ('key_hash', models.CharField(editable=False, max_length=64)),
                        ('created_at', models.DateTimeField(auto_now_add=True, verbose_name='created')),
                        ('last_used_at', models.DateTimeField(blank=True, null=True, verbose_name='last used')),
                        ('revoked_at', models.DateTimeField(blank=True, null=True, verbose_name='revoked')),
                        ('endpoint', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='keys', to='inference.endpoint')),
                    ],
                    options={
                        'verbose_name': 'endpoint key',
                        'verbose_name_plural': 'endpoint keys',
                        'db_table': 'instances_endpointkey',
                        'ordering': ['-created_at', '-id'],
                    },
                ),
                migrations.CreateModel(
                    name='EndpointRequest',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('at', models.DateTimeField(verbose_name='at')),
                        ('path', models.CharField(max_length=64, verbose_name='path')),
                        ('status_code', models.PositiveSmallIntegerField(verbose_name='status')),
                        ('latency_ms', models.PositiveIntegerField(verbose_name='latency (ms)')),
                        ('prompt_tokens', models.PositiveIntegerField(default=0, verbose_name='prompt tokens')),
                        ('completion_tokens', models.PositiveIntegerField(default=0, verbose_name='completion tokens')),
                        ('stream', models.BooleanField(default=False, verbose_name='streamed')),
                        ('endpoint', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='requests', to='inference.endpoint')),
                        ('key', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='inference.endpointkey')),
                    ],
                    options={
                        'verbose_name': 'endpoint request',
                        'verbose_name_plural': 'endpoint requests',
                        'db_table': 'instances_endpointrequest',
                        'ordering': ['-at', '-id'],
                        'indexes': [models.Index(fields=['endpoint', '-at'], name='endpointrequest_recent')],
                    },
                ),
            ],
            database_operations=[migrations.RunPython(move_content_types, move_content_types_back)],
        ),
    ]
