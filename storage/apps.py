from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _

from core import attaching


class StorageConfig(AppConfig):
    name = "storage"
    verbose_name = _("Storage")

    def ready(self):
        from . import attached, checks  # noqa: F401  (checks: registers the system checks)

        # Instances hand their machines disks, mounts and /root/shared without importing storage: they ask this.
        attaching.register_attached(attached)
