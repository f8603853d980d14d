from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class BillingConfig(AppConfig):
    name = "billing"
    verbose_name = _("Billing")

    def ready(self):
        from . import budgets, checks, price_version  # noqa: F401  (checks registers the system checks)

        price_version.connect()
        budgets.connect()
