from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class BillingConfig(AppConfig):
    name = "billing"
    verbose_name = _("Billing")

    def ready(self):
        from django.db.models.signals import post_migrate

        from . import budgets, checks, price_version, sqlite_indexes  # noqa: F401  (checks registers the system checks)

        price_version.connect()
        budgets.connect()
        post_migrate.connect(sqlite_indexes.make, sender=self, dispatch_uid="billing.sqlite_indexes")
