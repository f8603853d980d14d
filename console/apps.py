from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class ConsoleConfig(AppConfig):
    name = "console"
    verbose_name = _("Console")

    def ready(self):
        from . import checks, lookups, receivers  # noqa: F401  (the settings' checks; allauth's e-mail confirmation)

        lookups.register()
