"""The local backend's data disks and cloud-storage folders: each an ext4 file system of its size on the host.

A data disk (``<sandbox root>/disks/<disk id>``) and an account's cloud storage as its machines see it
(``<sandbox root>/shared/<account id>``) are folders that sandboxes bind-mount. Each is the mount point of a sparse
ext4 image beside it (``<name>.img``) of the disk's size, or of the storage ceiling (``STORAGE_MAX_GB``) for cloud
storage: writing past it fails inside with "No space left on device" instead of filling the host's disk, and the
host gives the image only the blocks really used (sparse, mounted with ``discard``). An image is made at first use
and stays mounted on the host while it exists; :func:`ready` mounts it again before a machine binds it (after a
reboot, say). It grows when the disk grows (never shrinks): online where the host may resize a mounted ext4,
else offline before its machine's next start, in the worker. It is deleted with its disk.

Hosts that cannot make images fall back as homes do (``local_home``, ``LOCAL_HOME_QUOTA``): a plain folder without
a limit, logged, or a refused start with ``LOCAL_HOME_QUOTA=on``. A folder that already holds files (made before
volumes were images) stays a plain folder, with its files.
"""

import fcntl
import logging
import os
import shutil
import subprocess
from contextlib import contextmanager
from pathlib import Path

from django.utils.translation import gettext as _

from . import local_home
from .base import BackendError, TransientBackendError

log = logging.getLogger(__name__)

GIB = local_home.GIB
TOOLS = ("losetup", "resize2fs", "e2fsck", "dumpe2fs")
PATH = "/usr/sbin:/usr/bin:/sbin:/bin"


def image_of(folder: Path) -> Path:
    return folder.with_name(f"{folder.name}.img")


def _pending(folder: Path) -> Path:
    return folder.with_name(f".{folder.name}.grow")


@contextmanager
def _locked(folder: Path):
    # The lock file stays when the volume goes: a waiter may hold it open, and a new one would be another lock.
    with open(folder.with_name(f".{folder.name}.lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def ensure(folder: Path, uid: int, size_gb: int) -> int:
    """``folder`` ready to bind into a machine: its image made (its root the sandbox user ``uid``'s, mode 0700)
    and mounted, and at least ``size_gb`` GB, or noted to grow before its machine's next start. Returns the size it
    is limited to in GB, or 0 for a plain folder without a limit."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    image = image_of(folder)
    with _locked(folder):
        made = False
        if not image.exists():
            why = _why_a_folder(folder)
            if why:
                _no_image(folder, uid, why)
                return 0
            _make(image, uid, size_gb)
            made = True
        folder.mkdir(exist_ok=True)
        local_home._mount(image, folder)
        if made:
            os.chmod(folder, 0o700)  # the file system's root: the sandbox user's alone, as a home is
            shutil.rmtree(folder / "lost+found", ignore_errors=True)
        _grow(image, folder, size_gb)
    return round(_fs_bytes(image) / GIB)


def ready(folder: Path) -> bool:
    """Before a machine binds ``folder`` (its start, in the worker): a grow that had to wait for the machine to
    stop done now, offline, and the image mounted on the host. False when the volume is gone (a deleted disk): the
    machine must not bind an empty folder in its place."""
    image = image_of(folder)
    if not image.exists():
        return folder.exists()  # a plain folder, or nothing at all
    with _locked(folder):
        pending = _pending(folder)
        if pending.exists():
            try:
                wanted = int(pending.read_text())
            except (OSError, ValueError):
                wanted = 0
            pending.unlink(missing_ok=True)
            if wanted and _fs_bytes(image) < wanted * GIB:
                _grow_offline(image, folder, wanted)
        folder.mkdir(exist_ok=True)
        local_home._mount(image, folder)
    return True


def _why_a_folder(folder: Path) -> str:
    if folder.exists() and any(folder.iterdir()):
        return "it already holds files (made before volumes were images)"
    if local_home.mode() == "off":
        return "LOCAL_HOME_QUOTA is off"
    missing = [tool for tool in TOOLS if not shutil.which(tool, path=PATH)]
    return local_home.unavailable() or (f"{missing[0]} is missing" if missing else "")


def _no_image(folder: Path, uid: int, why: str) -> None:
    if local_home.mode() == "on":
        log.warning("no image for %s: %s", folder, why)
        raise BackendError(_("This host cannot limit the size of the disk or the cloud storage folder."))
    log.warning("%s is a plain folder without a size limit: %s", folder, why)
    folder.mkdir(exist_ok=True)
    if folder.stat().st_uid != uid:
        os.chown(folder, uid, uid)


def _make(image: Path, uid: int, size_gb: int) -> None:
    try:
        local_home.make_ext4_image(image, uid, size_gb)
    except (OSError, TransientBackendError) as exc:
        raise TransientBackendError(_("The disk could not be made ready; trying again.")) from exc


def _grow(image: Path, folder: Path, size_gb: int) -> None:
    """Grow the file system to ``size_gb`` GB when it is smaller (never shrink): online, at once, where the host
    may resize a mounted ext4 (CAP_SYS_RESOURCE); else noted for :func:`ready`, which grows it offline before its
    machine's next start (in the worker, never in a web request)."""
    wanted = int(size_gb) * GIB
    if _fs_bytes(image) >= wanted:
        return
    devices = local_home.loop_devices(image)
    if devices:
        if image.stat().st_size < wanted:
            local_home._run(["truncate", "-s", str(wanted), str(image)])
        local_home._run(["losetup", "-c", devices[0]])
        if _quiet(["resize2fs", devices[0]]):
            return
    _pending(folder).write_text(str(int(size_gb)))
    log.info("%s grows to %s GB at its machine's next start (this host cannot resize a mounted file system)",
             folder, size_gb)  # fmt: skip


def _grow_offline(image: Path, folder: Path, size_gb: int) -> None:
    """Resize the unmounted image; one that a machine still holds (it has not stopped) waits again."""
    local_home._unmount(image, folder)
    if local_home.loop_devices(image):
        log.info("%s is still in use: it grows at its machine's next start", folder)
        _pending(folder).write_text(str(int(size_gb)))
        return
    wanted = int(size_gb) * GIB
    if image.stat().st_size < wanted:
        local_home._run(["truncate", "-s", str(wanted), str(image)])
    # e2fsck: 0 clean, 1 errors corrected; resize2fs insists on a freshly checked file system.
    if not _quiet(["e2fsck", "-f", "-p", str(image)], ok=(0, 1)) or not _quiet(["resize2fs", str(image)]):
        log.warning("%s could not grow to %s GB", folder, size_gb)


def _fs_bytes(image: Path) -> int:
    """The size of the image's file system (its superblock), which may be less than the image file's."""
    done = subprocess.run(["dumpe2fs", "-h", str(image)], capture_output=True, text=True, check=False,
                          env={"PATH": PATH})  # fmt: skip
    fields = dict(line.split(":", 1) for line in done.stdout.splitlines() if ":" in line)
    try:
        return int(fields["Block count"]) * int(fields["Block size"])
    except (KeyError, ValueError):
        log.warning("dumpe2fs could not read %s: %s", image, done.stderr.strip()[-300:])
        return image.stat().st_size


def _quiet(argv: list[str], ok=(0,)) -> bool:
    done = subprocess.run(argv, capture_output=True, text=True, check=False, env={"PATH": PATH})
    if done.returncode not in ok:
        log.info("%s: %s", " ".join(argv), (done.stderr or done.stdout).strip()[-300:])
    return done.returncode in ok


def delete(folder: Path) -> None:
    """The disk is deleted: its file system unmounted, its image and folder gone. Idempotent."""
    image = image_of(folder)
    with _locked(folder):
        local_home._unmount(image, folder)
        image.unlink(missing_ok=True)
        _pending(folder).unlink(missing_ok=True)
        if not local_home._is_mounted(folder):  # never delete through a mount that would not go
            shutil.rmtree(folder, ignore_errors=True)


def unmount_all(root: Path) -> None:
    """Every volume under ``root`` unmounted (its files kept in its image): for a host going down, and tests."""
    for parent in (root / "disks", root / "shared"):
        for image in parent.glob("*.img") if parent.exists() else ():
            folder = image.with_name(image.name[: -len(".img")])
            with _locked(folder):
                local_home._unmount(image, folder)
