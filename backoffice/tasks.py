"""Back-office tasks. ``accounts/tasks.py`` imports this module so the worker registers them."""

from celery import shared_task

from . import reports


@shared_task(ignore_result=True)
def record_capacity_snapshot():
    """Beat, every few minutes: cards per zone and chip for the capacity chart. Idempotent per time slot."""
    return reports.record_capacity_snapshot()
