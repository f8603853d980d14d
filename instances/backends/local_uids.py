"""The local backend's sandbox users: a range of host uids per console, claimed on the host.

An owner's machines run as host uid ``LOCAL_SANDBOX_UID_BASE`` + the owner's id; a console's range is
``[base, base + LOCAL_SANDBOX_UID_RANGE)``. Two consoles on one host whose ranges overlapped would give their users
the same host uids (one console's user could signal, trace or read the other's). So a console claims its range
before it starts a machine: one file per console under ``LOCAL_SANDBOX_UID_REGISTRY`` (``/run``, so claims go with a
reboot), named after and naming its ``DATA_DIR``, written under a lock. A start refuses, saying which console holds
what, while another console's claim overlaps and a process of that console's range runs on the host (its machines);
a claim whose console runs nothing there gives way, and one whose data folder is gone is dropped.
"""

import fcntl
import hashlib
import json
import os
from pathlib import Path

from django.conf import settings
from django.utils.translation import gettext as _

from .base import BackendError

LOCK = ".lock"


def extent() -> tuple[int, int]:
    """This console's range, ``(first, last + 1)``."""
    base = int(settings.LOCAL_SANDBOX_UID_BASE)
    return base, base + int(settings.LOCAL_SANDBOX_UID_RANGE)


def uid_for(owner_id: int) -> int:
    """The sandbox user of an owner; refuses an id past the range (it would be another console's uid)."""
    first, end = extent()
    uid = first + int(owner_id)
    if not first <= uid < end:
        raise BackendError(
            _("Account %(id)s is past this console's sandbox uid range (LOCAL_SANDBOX_UID_RANGE, %(size)s ids).")
            % {"id": owner_id, "size": end - first}
        )
    return uid


def _console() -> str:
    return str(Path(settings.DATA_DIR).resolve())


def _claim_file(registry: Path, console: str) -> Path:
    return registry / f"{hashlib.sha256(console.encode()).hexdigest()[:16]}.json"


def _in_use(first: int, end: int) -> bool:
    """Whether any process on this host runs as a uid of ``[first, end)``: a claim matters while its console has a
    machine (or anything else) running under it; a console with none left running holds nothing another could
    clash with, and its claim gives way."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = (entry / "status").read_text()
        except OSError:
            continue
        for line in status.splitlines():
            if line.startswith("Uid:"):
                if any(first <= int(uid) < end for uid in line.split()[1:]):
                    return True
                break
    return False


def claim() -> None:
    """Claim this console's range on the host, or refuse (BackendError) while another console's overlaps it."""
    registry = Path(settings.LOCAL_SANDBOX_UID_REGISTRY)
    registry.mkdir(mode=0o700, parents=True, exist_ok=True)
    console, (first, end) = _console(), extent()
    mine = _claim_file(registry, console)
    with open(registry / LOCK, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        for path in sorted(registry.glob("*.json")):
            if path == mine:
                continue
            try:
                other = json.loads(path.read_text())
                other_first, other_end, other_console = int(other["first"]), int(other["end"]), other["data_dir"]
            except (OSError, ValueError, KeyError, TypeError):
                continue  # half-written or foreign: not a claim
            if not Path(other_console).is_dir():
                path.unlink(missing_ok=True)  # that console's data folder is gone: so is the console
                continue
            if not (first < other_end and other_first < end):
                continue
            if not _in_use(other_first, other_end):
                path.unlink(missing_ok=True)  # that console runs nothing here: its claim gives way for good
                continue
            raise BackendError(
                _(
                    "This console's sandbox uids %(first)s–%(last)s overlap %(other_first)s–%(other_last)s, "
                    "which the console with the data folder %(other)s uses on this host (%(claim)s). Set "
                    "LOCAL_SANDBOX_UID_BASE to a range of its own, or delete that file if that console is gone."
                )
                % {
                    "first": first,
                    "last": end - 1,
                    "other_first": other_first,
                    "other_last": other_end - 1,
                    "other": other_console,
                    "claim": path,
                }
            )
        wanted = {"first": first, "end": end, "data_dir": console}
        try:
            if json.loads(mine.read_text()) == wanted:
                return
        except (OSError, ValueError):
            pass
        staging = mine.with_name(f".{mine.name}.{os.getpid()}")
        staging.write_text(json.dumps(wanted))
        os.replace(staging, mine)
