from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class StorageConfig(AppConfig):
    name = "storage"
    verbose_name = _("Storage")

    def ready(self):
        from instances import attachments

        from . import attached, checks  # noqa: F401  (checks: registers the system checks)

        attachments.register_storage(attached)
