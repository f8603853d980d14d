"""Attaching storage to machines: the contract between ``instances`` (the machines) and ``storage`` (data disks, hub
mounts and the owner's cloud storage at ``/root/shared``), two apps on one floor that import nothing of each other.

Each registers its side here when Django starts (``AppConfig.ready``), and a system check refuses to start without
it (``instances.E002``, ``storage.E002``):

* :class:`Attached`, registered by storage (``storage.attached``): what a launch attaches, the backend calls that
  hand a (re)started machine its disks and mounts, what a release gives back, where ``/root/shared`` is on this
  host, and the instance page's disks-and-mounts panel.
* :class:`Machines`, registered by instances (``instances.machines``): an instance by key as its user may reach it,
  locked, the ones a disk may attach to, whether one may change what is attached now, a hot-plug call to its
  backend, and the host's size-limited volumes that storage's own folders use too.

Where a data disk appears inside a machine is a rule both sides follow (the backends make the folder, the disk's
page names it), so it is written here once.
"""

from pathlib import Path
from typing import Protocol

# Where data disks appear inside a machine, on every backend: ``/root/data/<folder>`` (see :func:`disk_folder`).
DATA_ROOT = "/root/data"


def disk_folder_name(name: str, disk_id: str) -> str:
    """The folder a disk named ``name`` has in /root/data: its name, where that is a folder name (the console's
    disk names are: no "/", no control characters, not "." or ".."), else its id."""
    unsafe = not name or name in (".", "..") or "/" in name or len(name.encode()) > 255
    return disk_id if unsafe or any(ord(c) < 32 or ord(c) == 127 for c in name) else name


def disk_folder(name: str, disk_id: str, taken) -> str:
    """The folder of /root/data the disk ``disk_id`` named ``name`` gets on a machine: :func:`disk_folder_name`, or
    ``<it>-2``, ``-3``… while another disk of that machine has the folder already (``taken``: the other disks'
    folders). The same on every backend, so a disk is where its page says."""
    folder = base = disk_folder_name(name, disk_id)
    number = 2
    while folder in taken:
        folder, number = f"{base}-{number}", number + 1
    return folder


# What storage answers instances ------------------------------------------------------------------------------------


class Attached(Protocol):
    """What storage attaches to instances (its ``storage.attached`` module)."""

    def check_launch(self, user, request) -> None: ...
    def at_launch(self, instance, request) -> None: ...
    def calls(self, instance, backend) -> list: ...
    def on_released(self, instance) -> None: ...
    def shared_folder(self, account_public_id: str): ...
    def mounted_shared(self, account_public_id: str): ...
    def panel_context(self, instance) -> dict: ...


_attached: Attached | None = None


def register_attached(attached: Attached) -> None:
    global _attached
    _attached = attached


def attached() -> Attached:
    if _attached is None:
        raise RuntimeError("no storage is registered (the storage app registers it when installed)")
    return _attached


# What instances answer storage -------------------------------------------------------------------------------------


class Machines(Protocol):
    """What storage asks about the instances it attaches disks and mounts to (the ``instances.machines`` module).

    ``get`` raises ``core.errors.NotFound`` for a missing instance or someone else's, and
    ``Forbidden`` where the user's team role may only see it. ``backend_call`` runs ``call(backend)`` for a hot-plug
    and raises ``ServiceError`` when a running machine refuses. The volume calls raise ``OSError`` when the host
    cannot make or mount a volume now."""

    def get(self, user, public_id, action: str = "view"): ...
    def by_pk(self, pk: int): ...
    def lock(self, pk: int): ...
    def attachable(self, owner_id: int, zone_ids, *, user=None): ...
    def may_attach(self, instance) -> bool: ...
    def is_running(self, instance) -> bool: ...
    def is_launching(self, instance) -> bool: ...
    def shared_target(self, instance) -> str: ...
    def backend_call(self, instance, call, what: str = "mount") -> None: ...
    def is_simulated(self, instance) -> bool: ...
    def erase_disk(self, backend_name: str, disk_id: str) -> None: ...
    def volume_ready(self, folder: Path) -> bool: ...
    def ensure_volume(self, folder: Path, uid: int, size_gb: float) -> int: ...
    def unmount_volumes(self, root: Path, *more: Path) -> None: ...


_machines: Machines | None = None


def register_machines(machines: Machines) -> None:
    global _machines
    _machines = machines


def machines() -> Machines:
    if _machines is None:
        raise RuntimeError("no machines are registered (the instances app registers them when installed)")
    return _machines
