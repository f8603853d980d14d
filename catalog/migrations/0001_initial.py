"""The catalog models move here from the instances app: in the migration state only. Their tables keep their
names (``instances_zone``…), so no row moves; the content types follow them (admin history and permissions)."""

import django.core.validators
import django.db.models.deletion
from django.db import migrations, models


MOVED = ["region", "zone", "chip", "scalingfigure", "node", "instancespec"]


def _relabel(apps, old, new):
    ContentType = apps.get_model("contenttypes", "ContentType")
    for model in MOVED:
        if ContentType.objects.filter(app_label=new, model=model).exists():
            ContentType.objects.filter(app_label=old, model=model).delete()
        else:
            ContentType.objects.filter(app_label=old, model=model).update(app_label=new)


def move_content_types(apps, schema_editor):
    _relabel(apps, "instances", "catalog")


def move_content_types_back(apps, schema_editor):
    _relabel(apps, "catalog", "instances")


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ('instances', '0006_instance_price_help'),
        ('contenttypes', '0002_remove_content_type_name'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name='Region',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('name', models.CharField(max_length=100, verbose_name='name (English)')),
                        ('name_zh', models.CharField(blank=True, max_length=100, verbose_name='name (Chinese)')),
                        ('slug', models.SlugField(unique=True)),
                        ('sort_order', models.PositiveSmallIntegerField(default=0)),
                    ],
                    options={
                        'verbose_name': 'region',
                        'verbose_name_plural': 'regions',
                        'db_table': 'instances_region',
                        'ordering': ['sort_order', 'slug'],
                    },
                ),
                migrations.CreateModel(
                    name='Chip',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('name', models.CharField(max_length=100, verbose_name='name (English)')),
                        ('name_zh', models.CharField(blank=True, max_length=100, verbose_name='name (Chinese)')),
                        ('slug', models.SlugField(unique=True)),
                        ('vendor', models.CharField(max_length=64, verbose_name='vendor')),
                        ('backend', models.CharField(blank=True, choices=[('npu', 'Ascend NPU (CANN)'), ('mlu', 'Cambricon MLU (Neuware)'), ('dcu', 'Hygon DCU (DTK)'), ('cuda', 'NVIDIA GPU (CUDA)')], max_length=8, verbose_name='backend')),
                        ('xinchuang', models.BooleanField(default=False, help_text='Eligible for the Xinchuang zone and its subsidy.', verbose_name='domestic (Xinchuang)')),
                        ('rentable', models.BooleanField(default=True, help_text='Off for reference chips shown on the comparison page only.', verbose_name='rentable')),
                        ('memory_gb', models.PositiveIntegerField(blank=True, null=True, verbose_name='memory (GB)')),
                        ('memory_type', models.CharField(blank=True, max_length=16, verbose_name='memory type')),
                        ('memory_bandwidth_tbs', models.DecimalField(blank=True, decimal_places=3, max_digits=8, null=True, verbose_name='memory bandwidth (TB/s)')),
                        ('tflops_bf16', models.DecimalField(blank=True, decimal_places=3, max_digits=8, null=True, verbose_name='theoretical BF16 TFLOPS')),
                        ('tflops_fp16', models.DecimalField(blank=True, decimal_places=3, max_digits=8, null=True, verbose_name='theoretical FP16 TFLOPS')),
                        ('measured_tflops_bf16', models.DecimalField(blank=True, decimal_places=3, max_digits=8, null=True, verbose_name='measured BF16 TFLOPS')),
                        ('measured_tflops_fp16', models.DecimalField(blank=True, decimal_places=3, max_digits=8, null=True, verbose_name='measured FP16 TFLOPS')),
                        ('mfu', models.DecimalField(blank=True, decimal_places=4, max_digits=5, null=True, validators=[django.core.validators.MinValueValidator(0), django.core.validators.MaxValueValidator(1)], verbose_name='MFU (LLaMA3-70B training)')),
                        ('interconnect', models.CharField(blank=True, max_length=32, verbose_name='interconnect')),
                        ('interconnect_gbs', models.PositiveIntegerField(blank=True, null=True, verbose_name='interconnect bandwidth per card (GB/s)')),
                        ('glm70b_tokens_per_s', models.PositiveIntegerField(blank=True, null=True, verbose_name='GLM-70B training tokens/s')),
                        ('resnet50_precision', models.CharField(blank=True, max_length=8, verbose_name='ResNet-50 precision')),
                        ('resnet50_images_per_s', models.PositiveIntegerField(blank=True, null=True, verbose_name='ResNet-50 images/s (batch 128)')),
                        ('resnet50_latency_ms', models.DecimalField(blank=True, decimal_places=2, max_digits=7, null=True, verbose_name='ResNet-50 latency (ms)')),
                        ('resnet50_demo_price_per_hour', models.DecimalField(blank=True, decimal_places=2, max_digits=8, null=True, verbose_name='ResNet-50 demo instance price per hour (as published)')),
                        ('software', models.JSONField(blank=True, default=list, verbose_name='software stack')),
                        ('note', models.TextField(blank=True, help_text="Where the operator's sources disagree.", verbose_name='note')),
                        ('sort_order', models.PositiveSmallIntegerField(default=0)),
                    ],
                    options={
                        'verbose_name': 'chip',
                        'verbose_name_plural': 'chips',
                        'db_table': 'instances_chip',
                        'ordering': ['sort_order', 'slug'],
                        'constraints': [models.CheckConstraint(condition=models.Q(('rentable', False), models.Q(('backend', ''), _negated=True), _connector='OR'), name='rentable_chip_has_backend')],
                    },
                ),
                migrations.CreateModel(
                    name='Zone',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('name', models.CharField(max_length=100, verbose_name='name (English)')),
                        ('name_zh', models.CharField(blank=True, max_length=100, verbose_name='name (Chinese)')),
                        ('slug', models.SlugField(unique=True)),
                        ('xinchuang', models.BooleanField(default=False, help_text='Domestic chips only; domestic OS images available.', verbose_name='Xinchuang zone')),
                        ('active', models.BooleanField(default=True, verbose_name='active')),
                        ('sort_order', models.PositiveSmallIntegerField(default=0)),
                        ('region', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='zones', to='catalog.region')),
                    ],
                    options={
                        'verbose_name': 'zone',
                        'verbose_name_plural': 'zones',
                        'db_table': 'instances_zone',
                        'ordering': ['region__sort_order', 'sort_order', 'slug'],
                    },
                ),
                migrations.CreateModel(
                    name='InstanceSpec',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('slug', models.SlugField(unique=True)),
                        ('cards', models.PositiveSmallIntegerField(validators=[django.core.validators.MaxValueValidator(8)], verbose_name='cards')),
                        ('vcpus', models.PositiveSmallIntegerField(validators=[django.core.validators.MinValueValidator(1)], verbose_name='vCPUs')),
                        ('memory_gb', models.PositiveIntegerField(validators=[django.core.validators.MinValueValidator(1)], verbose_name='RAM (GB)')),
                        ('system_disk_gb', models.PositiveIntegerField(validators=[django.core.validators.MinValueValidator(1)], verbose_name='system disk (GB)')),
                        ('active', models.BooleanField(default=True, verbose_name='active')),
                        ('chip', models.ForeignKey(blank=True, help_text='Empty: no-card', null=True, on_delete=django.db.models.deletion.PROTECT, related_name='specs', to='catalog.chip')),
                    ],
                    options={
                        'verbose_name': 'instance spec',
                        'verbose_name_plural': 'instance specs',
                        'db_table': 'instances_instancespec',
                        'ordering': ['chip__sort_order', 'chip__slug', 'cards'],
                        'constraints': [models.UniqueConstraint(fields=('chip', 'cards'), name='one_spec_per_chip_and_cards'), models.CheckConstraint(condition=models.Q(models.Q(('chip__isnull', True), ('cards', 0)), models.Q(('chip__isnull', False), ('cards__in', [1, 2, 4, 8])), _connector='OR'), name='spec_cards_match_chip')],
                    },
                ),
                migrations.CreateModel(
                    name='ScalingFigure',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('cards', models.PositiveIntegerField(validators=[django.core.validators.MinValueValidator(2)], verbose_name='cluster size (cards)')),
                        ('efficiency', models.DecimalField(decimal_places=4, max_digits=5, validators=[django.core.validators.MinValueValidator(0), django.core.validators.MaxValueValidator(1)], verbose_name='scaling efficiency')),
                        ('chip', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='scaling_figures', to='catalog.chip')),
                    ],
                    options={
                        'verbose_name': 'scaling figure',
                        'verbose_name_plural': 'scaling figures',
                        'db_table': 'instances_scalingfigure',
                        'ordering': ['chip', 'cards'],
                        'constraints': [models.UniqueConstraint(fields=('chip', 'cards'), name='one_scaling_figure_per_size')],
                    },
                ),
                migrations.CreateModel(
                    name='Node',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('name', models.CharField(max_length=64, verbose_name='name')),
                        ('cards', models.PositiveSmallIntegerField(validators=[django.core.validators.MinValueValidator(1), django.core.validators.MaxValueValidator(16)], verbose_name='cards')),
                        ('backend_name', models.CharField(default='simulated', help_text='simulated, slurm, …', max_length=32, verbose_name='compute backend')),
                        ('drained', models.BooleanField(default=False, help_text='Takes no new instances.', verbose_name='drained')),
                        ('cards_reserved', models.PositiveSmallIntegerField(default=0, help_text='Held by instances; changed only by compare-and-set.', verbose_name='cards reserved')),
                        ('created_at', models.DateTimeField(auto_now_add=True)),
                        ('chip', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='nodes', to='catalog.chip')),
                        ('zone', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='nodes', to='catalog.zone')),
                    ],
                    options={
                        'verbose_name': 'node',
                        'verbose_name_plural': 'nodes',
                        'db_table': 'instances_node',
                        'ordering': ['zone', 'name'],
                        'constraints': [models.UniqueConstraint(fields=('zone', 'name'), name='node_name_unique_in_zone'), models.CheckConstraint(condition=models.Q(('cards__gte', 1)), name='node_has_cards'), models.CheckConstraint(condition=models.Q(('cards_reserved__lte', models.F('cards'))), name='node_never_oversold')],
                    },
                ),
            ],
            database_operations=[migrations.RunPython(move_content_types, move_content_types_back)],
        ),
    ]
