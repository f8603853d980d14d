"""Console tasks."""

from celery import shared_task

from . import services


@shared_task(bind=True, ignore_result=True)
def heartbeat(self):
    """Record that this worker is alive (run by beat every few seconds and once at worker start)."""
    services.record_heartbeat(self.request.hostname or "unknown")
