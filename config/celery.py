"""The Celery app. Workers and beat run with ``celery -A config worker`` / ``celery -A config beat``."""

import os

from celery import Celery
from celery.signals import worker_ready

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("gpucloud")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@worker_ready.connect
def _announce_worker(sender, **kwargs):
    # The first heartbeat goes through the broker like any other task, so /healthz turns green only once
    # the whole path (producer → broker → worker → database) works, without waiting for beat's first tick.
    sender.app.send_task("accounts.tasks.heartbeat")
