"""Cloud storage on local disk becomes a tree: every file's bytes move from its opaque key (``<owner>/<entry>``) to
its path in its account's folder, so machines see the same files at /root/shared. Idempotent and resumable; on
S3 storage nothing moves. A file whose bytes were already missing keeps its key and is logged."""

import logging

from django.conf import settings
from django.db import migrations


def files_to_their_paths(apps, schema_editor):
    from storage.tree import migrate_layout

    migrate_layout(
        apps.get_model("storage", "Entry"),
        apps.get_model(*settings.AUTH_USER_MODEL.split(".")),
        write=logging.getLogger("storage").warning,
    )


class Migration(migrations.Migration):
    dependencies = [("storage", "0006_stored_elsewhere")]

    operations = [migrations.RunPython(files_to_their_paths, migrations.RunPython.noop, elidable=False)]
