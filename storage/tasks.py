"""Periodic storage work: expiring abandoned uploads."""

from celery import shared_task

from . import services


@shared_task
def expire_uploads() -> int:
    """Delete uploads idle past their expiry with their staged bytes (idempotent; beat runs it hourly)."""
    return services.expire_stale_uploads()
