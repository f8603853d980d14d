"""Cloud storage on S3 becomes a tree too: every file's object moves (a copy inside the bucket) from its opaque key
(``<owner>/<entry>``) to its path under its account's prefix, which the host mounts at /root/shared with rclone;
folders get their markers. Idempotent; on local storage the earlier migration did this already. A file whose
object was already missing keeps its key and is logged."""

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
    dependencies = [("storage", "0007_files_at_their_paths")]

    operations = [migrations.RunPython(files_to_their_paths, migrations.RunPython.noop, elidable=False)]
