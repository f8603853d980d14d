from django.apps import AppConfig
from django.db.models.signals import post_migrate
from django.utils.translation import gettext_lazy as _


class AccountsConfig(AppConfig):
    """The people who use the console. The package was called ``console`` before; its label still is, so its tables
    (``console_user``…), migrations, permissions (``console.view_users``…) and ``AUTH_USER_MODEL`` keep their names
    and a database of any earlier schema needs no migration for the move."""

    name = "accounts"
    label = "console"
    verbose_name = _("Accounts")

    def ready(self):
        from core import lookups

        from . import checks, data_dir, receivers  # noqa: F401  (the settings' checks; allauth's e-mail confirmation)

        lookups.register()
        # After every migrate (each deploy, each make run): the data folder made private (see accounts.data_dir).
        post_migrate.connect(data_dir.after_migrate, sender=self, dispatch_uid="accounts.data_dir")
