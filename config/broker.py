"""The embedded Celery broker: kombu's filesystem transport, shared by every process on one machine."""

from pathlib import Path


def filesystem_transport_options(folder: Path) -> dict:
    """Transport options for ``filesystem://`` rooted at ``folder`` (created if missing).

    Producers and consumers must use the same folder for messages in and out; processed messages are not
    kept. Several workers may consume the folder: kombu claims each message file with an exclusive lock.
    """
    queue, processed, control = (Path(folder) / name for name in ("queue", "processed", "control"))
    for path in (queue, processed, control):
        path.mkdir(parents=True, exist_ok=True)
    return {
        "data_folder_in": str(queue),
        "data_folder_out": str(queue),
        "processed_folder": str(processed),
        "store_processed": False,
        # Broadcast (remote control) exchanges; kombu's default is ./control in the working directory.
        "control_folder": str(control),
        # Poll five times a second: tasks start quickly and the cost is one directory listing.
        "polling_interval": 0.2,
    }
