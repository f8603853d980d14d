"""An instance's system disk as an image: how much it holds and its snapshot, asked of the instance's backend.

The marketplace saves a stopped instance as an image through these functions, so it never talks to a compute
backend itself. A refusal is a ServiceError with the backend's reason; a backend that is briefly unreachable raises
one of ``RETRYABLE``, which the snapshot task retries with backoff.
"""

from core.errors import ServiceError

from .backends import BackendError, TransientBackendError, get_backend
from .models import Instance

RETRYABLE = (TransientBackendError,)


def system_disk_usage(instance: Instance) -> int:
    """The bytes on ``instance``'s system disk (what an image saved from it would weigh)."""
    try:
        return get_backend(instance.backend_name).system_disk_usage(instance)
    except BackendError as exc:
        raise ServiceError(str(exc), code="snapshot_unavailable") from exc


def snapshot_system_disk(instance: Instance) -> int:
    """Snapshot ``instance``'s system disk; returns the snapshot's size in bytes."""
    try:
        return get_backend(instance.backend_name).snapshot_system_disk(instance)
    except RETRYABLE:
        raise
    except BackendError as exc:
        raise ServiceError(str(exc), code="snapshot_failed") from exc
