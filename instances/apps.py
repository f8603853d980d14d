from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _

from core import attaching

from . import checks  # noqa: F401  (registers the system checks)


class InstancesConfig(AppConfig):
    name = "instances"
    verbose_name = _("Instances")

    def ready(self):
        from billing import arrears

        from . import machines  # imports the models, which are not ready when this module is
        from .lifecycle import stop_for_arrears

        # Billing stops nothing itself: when a balance or a spending cap runs out, it calls this.
        arrears.register_handler(stop_for_arrears)
        # Storage attaches disks and mounts to instances without importing them: it asks this.
        attaching.register_machines(machines)
