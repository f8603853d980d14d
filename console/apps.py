from django.apps import AppConfig
from django.db.models.signals import post_migrate
from django.utils.translation import gettext_lazy as _


class ConsoleConfig(AppConfig):
    name = "console"
    verbose_name = _("Console")

    def ready(self):
        from core import lookups

        from . import checks, data_dir, receivers  # noqa: F401  (the settings' checks; allauth's e-mail confirmation)

        lookups.register()
        # After every migrate (each deploy, each make run): the data folder made private (see console.data_dir).
        post_migrate.connect(data_dir.after_migrate, sender=self, dispatch_uid="console.data_dir")
