from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class JobsConfig(AppConfig):
    name = "jobs"
    verbose_name = _("Jobs")

    def ready(self):
        from instances import queue

        from . import running

        # Queued jobs wait in the console's one queue, beside the launches waiting for a card.
        queue.register(running.queued_entries, running.machine_ends)
