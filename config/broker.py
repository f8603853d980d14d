"""The embedded Celery broker: kombu's filesystem transport, shared by every process on one machine."""

import contextlib
import os
import uuid
from pathlib import Path
from time import monotonic

from kombu.exceptions import ChannelError
from kombu.transport import TRANSPORT_ALIASES, filesystem
from kombu.utils.encoding import str_to_bytes
from kombu.utils.json import dumps


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


class AtomicChannel(filesystem.Channel):
    """kombu's filesystem channel, publishing each message atomically.

    kombu writes a message straight into its final file name, and a consumer may move and read that file before
    the producer has finished writing it (seen as a JSONDecodeError in a worker). Here the message is written to a
    hidden temporary file in the same folder, then renamed into place: a consumer only ever sees whole messages.
    """

    def _put(self, queue, payload, **kwargs):
        name = f"{round(monotonic() * 1000)}_{uuid.uuid4()}.{queue}.msg"
        temporary = os.path.join(self.data_folder_out, f".{uuid.uuid4()}.partial")
        try:
            with open(temporary, "wb") as file:
                file.write(str_to_bytes(dumps(payload)))
            os.replace(temporary, os.path.join(self.data_folder_out, name))
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.remove(temporary)
            raise ChannelError(f"Cannot add a message to {self.data_folder_out!r}") from exc


class AtomicTransport(filesystem.Transport):
    Channel = AtomicChannel


# `filesystem://` everywhere (settings, tests, every process that imports the settings) uses the atomic channel.
TRANSPORT_ALIASES["filesystem"] = "config.broker:AtomicTransport"
