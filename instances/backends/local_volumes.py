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
a limit, logged, or a refused start with ``LOCAL_HOME_QUOTA=on``. A data disk's folder that already holds files
(made before volumes were images) stays a plain folder, with its files; an account's cloud storage tree that holds
files is adopted: its files are copied into a new image, which then takes the folder's place.

The host never promises more than it holds: images are sparse, so what each may still grow into (its size less
the blocks it already has) is a promise against the host's free space. A new image, or a grown one, gets at most
the host's free space less ``LOCAL_HOST_RESERVE_GB`` less every other image's promise on the same file system:
sized to what was asked (a disk's size, the storage quota) where that fits, smaller (logged) where it does not, and
refused with a message saying why when not even the files it must hold fit.
"""

import fcntl
import logging
import os
import shutil
import subprocess
from contextlib import contextmanager
from pathlib import Path

from django.conf import settings
from django.template.defaultfilters import filesizeformat
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


def ensure(folder: Path, uid: int, size_gb: float, *, adopt: bool = False) -> int:
    """``folder`` ready to bind into a machine: its image made (its root the sandbox user ``uid``'s, mode 0700)
    and mounted, and at least ``size_gb`` GB (as far as the host can hold), or noted to grow before its machine's
    next start. ``adopt``: a plain folder that holds files has them copied into the new image. Returns the size it
    is limited to in GB, or 0 for a plain folder without a limit."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    image = image_of(folder)
    with _locked(folder):
        made = False
        if not image.exists():
            why = _why_a_folder(folder, adopt=adopt)
            if why:
                _no_image(folder, uid, why)
                return 0
            size_gb = _room(folder, image, size_gb, holds=_bytes_in(folder))
            if adopt and folder.exists() and any(folder.iterdir()):
                _adopt(folder, image, uid, size_gb)
            else:
                _make(image, uid, size_gb)
            made = True
        else:
            size_gb = _room(folder, image, size_gb, holds=0)
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
                wanted = float(pending.read_text())
            except (OSError, ValueError):
                wanted = 0
            pending.unlink(missing_ok=True)
            if wanted and _fs_bytes(image) < int(wanted * GIB):
                _grow_offline(image, folder, wanted)
        folder.mkdir(exist_ok=True)
        local_home._mount(image, folder)
    return True


def _why_a_folder(folder: Path, *, adopt: bool = False) -> str:
    if not adopt and folder.exists() and any(folder.iterdir()):
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


def _bytes_in(folder: Path) -> int:
    total = 0
    for path in folder.rglob("*") if folder.exists() else ():
        try:
            info = path.lstat()
        except OSError:
            continue
        total += info.st_blocks * 512
    return total


def _images_beside(folder: Path):
    """Every image this host's local backend keeps on ``folder``'s file system: homes, disks, storage trees."""
    sandboxes = Path(settings.LOCAL_SANDBOX_ROOT)
    places = [
        folder.parent.glob("*.img"),
        (sandboxes / "disks").glob("*.img"),
        (sandboxes / "shared").glob("*.img"),
        (sandboxes / "instances").glob("*/*.img"),
    ]
    device = folder.parent.stat().st_dev
    seen = set()
    for place in places:
        for image in place:
            try:
                info = image.stat()
            except OSError:
                continue
            if info.st_dev == device and (info.st_dev, info.st_ino) not in seen:
                seen.add((info.st_dev, info.st_ino))
                yield image, info


def _room(folder: Path, image: Path, size_gb: float, *, holds: int) -> float:
    """The size (GB) ``image`` may have: ``size_gb`` where the host can hold it, else what it can. Refused
    (``BackendError``) when that is not even enough for ``holds`` bytes (the files it must take in) and for
    a new image at least 1% of what was asked."""
    wanted = int(size_gb * GIB)
    try:
        mine = image.stat()
    except FileNotFoundError:
        mine = None
    if mine is not None and mine.st_size >= wanted:
        return size_gb  # no growth, no new promise
    reserve = int(float(settings.LOCAL_HOST_RESERVE_GB) * GIB)
    free = shutil.disk_usage(folder.parent).free
    promised = sum(
        max(0, info.st_size - info.st_blocks * 512)
        for other, info in _images_beside(folder)
        if mine is None or (info.st_dev, info.st_ino) != (mine.st_dev, mine.st_ino)
    )
    has = mine.st_blocks * 512 if mine is not None else 0
    room = free - reserve - promised + has  # the most the image may reach: its blocks plus what is left to promise
    if room >= wanted:
        return size_gb
    current = mine.st_size if mine is not None else 0
    least = max(holds * 2, int(wanted * 0.01), current + 1)
    if room < least:
        log.warning(
            "%s: the host cannot hold %s (free %s, reserve %s, promised to other images %s)",
            folder,
            wanted,
            free,
            reserve,
            promised,
        )
        if mine is not None:
            return current / GIB  # it keeps the size it has
        raise BackendError(
            _(
                "This host cannot hold %(size)s more: it has %(free)s free, keeps %(reserve)s for itself and has "
                "promised %(promised)s to other disks and storage. The operator can free space on the host or "
                "lower STORAGE_MAX_GB or LOCAL_HOST_RESERVE_GB."
            )
            % {
                "size": filesizeformat(wanted),
                "free": filesizeformat(free),
                "reserve": filesizeformat(reserve),
                "promised": filesizeformat(promised),
            }
        )
    log.warning(
        "%s: limited to %s of the %s asked for, all this host can still hold",
        folder,
        filesizeformat(room),
        filesizeformat(wanted),
    )
    return (room // (1024 * 1024)) * 1024 * 1024 / GIB


def _adopt(folder: Path, image: Path, uid: int, size_gb: float) -> None:
    """A plain folder that holds files becomes an image of ``size_gb`` GB with the same files (the sandbox user
    ``uid``'s), mounted in its place. The caller holds the volume's lock, which the console's writes share, so
    nothing is written to the folder meanwhile. Files that do not fit leave the folder as it was."""
    _make(image, uid, size_gb)
    fill = folder.with_name(f".{folder.name}.fill")
    fill.mkdir(exist_ok=True)
    try:
        local_home._mount(image, fill)
        copied = _quiet(["cp", "-a", "--no-dereference", f"{folder}/.", str(fill)]) and _quiet(
            ["chown", "-R", "-h", f"{uid}:{uid}", str(fill)]
        )
        os.chmod(fill, 0o700)
        shutil.rmtree(fill / "lost+found", ignore_errors=True)
    finally:
        local_home._unmount(image, fill)
        fill.rmdir()
    if not copied:
        image.unlink(missing_ok=True)
        raise BackendError(_("The files in this cloud storage do not fit in its quota; delete some and try again."))
    old = folder.with_name(f".{folder.name}.old")
    os.rename(folder, old)
    folder.mkdir()
    local_home._mount(image, folder)
    shutil.rmtree(old, ignore_errors=True)
    log.info("%s: its files moved into a size-limited image", folder)


def _grow(image: Path, folder: Path, size_gb: float) -> None:
    """Grow the file system to ``size_gb`` GB when it is smaller (never shrink): online, at once, where the host
    may resize a mounted ext4 (CAP_SYS_RESOURCE); else noted for :func:`ready`, which grows it offline before its
    machine's next start (in the worker, never in a web request)."""
    wanted = int(size_gb * GIB)
    if _fs_bytes(image) >= wanted:
        return
    devices = local_home.loop_devices(image)
    if devices:
        if image.stat().st_size < wanted:
            local_home._run(["truncate", "-s", str(wanted), str(image)])
        local_home._run(["losetup", "-c", devices[0]])
        if _quiet(["resize2fs", devices[0]]):
            return
    _pending(folder).write_text(str(size_gb))
    log.info(
        "%s grows to %s GB at its machine's next start (this host cannot resize a mounted file system)", folder, size_gb
    )


def _grow_offline(image: Path, folder: Path, size_gb: int) -> None:
    """Resize the unmounted image; one that a machine still holds (it has not stopped) waits again."""
    local_home._unmount(image, folder)
    if local_home.loop_devices(image):
        log.info("%s is still in use: it grows at its machine's next start", folder)
        _pending(folder).write_text(str(size_gb))
        return
    wanted = int(size_gb * GIB)
    if image.stat().st_size < wanted:
        local_home._run(["truncate", "-s", str(wanted), str(image)])
    # e2fsck: 0 clean, 1 errors corrected; resize2fs insists on a freshly checked file system.
    if not _quiet(["e2fsck", "-f", "-p", str(image)], ok=(0, 1)) or not _quiet(["resize2fs", str(image)]):
        log.warning("%s could not grow to %s GB", folder, size_gb)


def _fs_bytes(image: Path) -> int:
    """The size of the image's file system (its superblock), which may be less than the image file's."""
    done = subprocess.run(
        ["dumpe2fs", "-h", str(image)], capture_output=True, text=True, check=False, env={"PATH": PATH}
    )
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


def merge_earlier(earlier: Path, folder: Path) -> None:
    """The files of an account's earlier ``/root/shared`` (``earlier``: an image of its own under the sandbox root,
    which the console never saw) copied into its cloud storage tree ``folder`` (ready and mounted), never over a
    file of the same path; the earlier volume deleted once every file is copied. Files that do not fit (the
    quota) or clash leave it in place, logged, for the operator."""
    if not image_of(earlier).exists() and not earlier.is_dir():
        return
    if not ready(earlier):
        return
    with _locked(earlier):
        copied = _quiet(["cp", "-a", "--no-dereference", "-n", f"{earlier}/.", str(folder)])
        clashes = [p for p in earlier.rglob("*") if not p.is_dir() and not _same(p, folder / p.relative_to(earlier))]
    if copied and not clashes:
        delete(earlier)
        log.info("%s: the files of the earlier /root/shared (%s) are in the account's cloud storage", folder, earlier)
    else:
        log.warning("%s: the earlier /root/shared %s was not merged completely; it is kept", folder, earlier)


def _same(one: Path, other: Path) -> bool:
    """Whether ``other`` is a copy of ``one`` (``cp -a`` keeps the size and the modification time)."""
    try:
        a, b = one.lstat(), other.lstat()
    except OSError:
        return False
    return (a.st_size, int(a.st_mtime)) == (b.st_size, int(b.st_mtime))


def unmount_all(root: Path, *more: Path) -> None:
    """Every volume under ``root`` (and in the folders ``more``, such as the cloud storage location) unmounted, its
    files kept in its image: for a host going down, and tests."""
    for parent in (root / "disks", root / "shared", *more):
        for image in parent.glob("*.img") if parent.exists() else ():
            unmount(image.with_name(image.name[: -len(".img")]))


def unmount(folder: Path) -> None:
    """The volume at ``folder`` unmounted, its files kept in its image; nothing when it has no image."""
    image = image_of(folder)
    if image.exists():
        with _locked(folder):
            local_home._unmount(image, folder)
