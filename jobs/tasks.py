"""Celery tasks of jobs: one beat step that places queued jobs and watches running ones. Thin and idempotent."""

import logging

from celery import shared_task
from kombu.exceptions import OperationalError

from . import running, schedules

logger = logging.getLogger(__name__)


@shared_task
def tick() -> dict:
    """Look at every job with a machine, submit the scheduled runs that are due, then place what can start (a card
    a finished job freed is taken in the same step). Safe when two beats overlap."""
    watched = running.watch_active()
    scheduled = schedules.fire_due()
    return {"watched": watched, "scheduled": scheduled, "started": running.place_queued()}


def place_soon() -> None:
    """Run a tick now rather than at the next beat (after a submission, or when a card was freed)."""
    try:
        tick.delay()
    except (OperationalError, OSError):
        logger.warning("broker unavailable: queued jobs wait for the next beat")
