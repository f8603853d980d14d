import uuid

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("console", "0004_catalog_app"),
    ]

    operations = [
        migrations.CreateModel(
            name="SSHKey",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("public_id", models.UUIDField(default=uuid.uuid4, editable=False, unique=True)),
                ("name", models.CharField(max_length=100, verbose_name="name")),
                ("public_key", models.TextField(editable=False, verbose_name="public key")),
                ("fingerprint", models.CharField(editable=False, max_length=64, verbose_name="fingerprint")),
                ("key_type", models.CharField(editable=False, max_length=32, verbose_name="key type")),
                ("created_at", models.DateTimeField(auto_now_add=True, verbose_name="created")),
                ("last_used_at", models.DateTimeField(blank=True, null=True, verbose_name="last used")),
                (
                    "user",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="ssh_keys",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
            ],
            options={
                "verbose_name": "SSH key",
                "verbose_name_plural": "SSH keys",
                "ordering": ["-created_at", "-pk"],
                "constraints": [
                    models.UniqueConstraint(fields=("user", "fingerprint"), name="one_ssh_key_per_fingerprint")
                ],
            },
        ),
    ]
