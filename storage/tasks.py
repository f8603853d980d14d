"""Periodic storage work: expiring abandoned uploads."""

from celery import shared_task

from . import charges, services


@shared_task
def expire_uploads() -> int:
    """Delete uploads idle past their expiry with their staged bytes (idempotent; beat runs it hourly)."""
    return services.expire_stale_uploads()


@shared_task
def charge_storage_daily() -> dict:
    """Charge yesterday's cloud storage beyond the free tier (idempotent per user per day; beat runs it hourly so
    a missed hour or a restart never skips a day) and mark the disks of users in arrears."""
    return charges.daily()
