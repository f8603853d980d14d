"""Celery tasks of inference endpoints: thin, idempotent."""

from celery import shared_task

from . import services


@shared_task
def scale_endpoints_to_zero() -> int:
    """Stop inference endpoints idle for their scale-to-zero minutes."""
    return services.scale_to_zero()
