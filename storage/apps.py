from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class StorageConfig(AppConfig):
    name = "storage"
    verbose_name = _("Storage")

    def ready(self):
        from . import checks  # noqa: F401  (registers the system checks)
