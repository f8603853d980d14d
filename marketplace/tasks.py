"""Celery tasks of the image marketplace: thin, ids only, enqueued on commit, idempotent."""

from celery import shared_task

from instances.snapshots import RETRYABLE

from .hub import blobs, repos
from .images import imports, services


@shared_task(autoretry_for=RETRYABLE, retry_backoff=2, retry_backoff_max=60, max_retries=8)
def snapshot_image(image_id: int) -> str | None:
    """Snapshot the system disk of a saved instance into its image (a no-op once the image is not saving)."""
    return services.complete_snapshot(image_id)


@shared_task
def import_image(image_id: int) -> str | None:
    """Copy, unpack and check an image imported from a registry (a no-op once the image is not importing)."""
    return imports.run_import(image_id)


@shared_task(ignore_result=True)
def sweep_hub_blobs() -> int:
    """Delete the hub's stored files that no commit names, long after their upload (hourly), then record every
    publisher's hub bytes in their storage again."""
    removed = blobs.sweep_orphans()
    repos.record_all_usage()
    return removed
