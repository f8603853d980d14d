from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class NotificationsConfig(AppConfig):
    name = "notifications"
    verbose_name = _("Notifications")

    def ready(self):
        from billing import arrears

        from .tasks import enqueue_delivery

        # Every billing, instance and job event is recorded through billing's notify(); after it commits, the
        # notification is handed to the user's channels. Billing itself imports nothing of this app.
        arrears.register_listener(enqueue_delivery)
