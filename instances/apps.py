from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _

from . import checks  # noqa: F401  (registers the system checks)


class InstancesConfig(AppConfig):
    name = "instances"
    verbose_name = _("Instances")

    def ready(self):
        from billing import arrears

        from .lifecycle import stop_for_arrears

        # Billing stops nothing itself: when a balance or a spending cap runs out, it calls this.
        arrears.register_handler(stop_for_arrears)
