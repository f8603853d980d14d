from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class JobsConfig(AppConfig):
    name = "jobs"
    verbose_name = _("Jobs")

    def ready(self):
        from instances import queue
        from marketplace.signals import image_removal_asked

        from . import running, services

        # Queued jobs wait in the console's one queue, beside the launches waiting for a card.
        queue.register(running.queued_entries, running.machine_ends)
        # An imported image a queued job or a schedule boots from is not removed from under it.
        image_removal_asked.connect(services.why_an_image_is_needed, dispatch_uid="jobs.why_an_image_is_needed")
