"""Celery tasks of the instance lifecycle: thin, ids only, enqueued on commit, idempotent.

Each carries the instance id and the state it should reach; ``services.advance`` checks both before acting, so a
retried, duplicated or superseded task is harmless. When the backend needs time (an image pull, a grace period)
the task looks again later; if that message is lost, the reconcile beat picks the instance up.
"""

from celery import shared_task

from . import housekeeping as upkeep
from . import lifecycle
from .backends import TransientBackendError

# A task re-checks a slow step at most this many times before leaving it to reconcile.
MAX_FOLLOW_UPS = 60


def _drive(task, instance_id: int, wanted: str, follow_up: int) -> None:
    retry_in = lifecycle.advance(instance_id, wanted)
    if retry_in is None or task.request.is_eager or follow_up >= MAX_FOLLOW_UPS:
        return
    task.apply_async((instance_id, wanted), {"follow_up": follow_up + 1}, countdown=min(retry_in, 30))


_RETRY = {"autoretry_for": (TransientBackendError,), "retry_backoff": 2, "retry_backoff_max": 60, "max_retries": 8}


@shared_task(bind=True, **_RETRY)
def provision(self, instance_id: int, wanted: str = "running", follow_up: int = 0) -> None:
    """Submit a new instance to its backend and wait until it is healthy (then metering starts)."""
    _drive(self, instance_id, wanted, follow_up)


@shared_task(bind=True, **_RETRY)
def start(self, instance_id: int, wanted: str = "running", follow_up: int = 0) -> None:
    _drive(self, instance_id, wanted, follow_up)


@shared_task(bind=True, **_RETRY)
def stop(self, instance_id: int, wanted: str = "stopped", follow_up: int = 0) -> None:
    """Checkpoint signal, grace period, stop; then the cards are free again."""
    _drive(self, instance_id, wanted, follow_up)


@shared_task(bind=True, **_RETRY)
def release(self, instance_id: int, wanted: str = "released", follow_up: int = 0) -> None:
    """Delete the machine and its system disk (never a data disk)."""
    _drive(self, instance_id, wanted, follow_up)


@shared_task
def reconcile() -> int:
    return lifecycle.reconcile()


@shared_task
def housekeeping() -> dict:
    return upkeep.housekeeping()
