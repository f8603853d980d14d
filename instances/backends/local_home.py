"""The local backend's system disk: each instance's home is an ext4 file system of the system disk's size.

The home (``<instance folder>/root``, the sandbox's ``/root``) is a sparse image file, ``root.img``, beside it in
the instance's root-owned folder, loop-mounted at the home before the sandbox starts. Writing past the size fails
inside with "No space left on device", so one user cannot fill the host's disk; the host gives the image only the
blocks the instance really uses (it is sparse, and mounted with ``discard``, so deleted files give theirs back).
The image is unmounted when the machine stops, after its processes are gone, mounted again at start with the same
files, and deleted on release. The sandbox never sees the image file, only the mounted file system: nothing a
user does can hand the host's kernel a crafted file system.

Where loop devices or ``mkfs.ext4`` are missing (not root, a container without ``/dev/loop-control``), or with
``LOCAL_HOME_QUOTA=off``, a new home is a plain folder without a size limit, and the log and the instance page
say so; ``LOCAL_HOME_QUOTA=on`` refuses to start a machine without a limit instead. A plain-folder home made
before homes were images stays a plain folder, with its files.

Every mount, unmount and borrowing of a home holds the instance's ``home.lock``: the worker (start, stop,
release) and the web process (the size of a stopped instance's home) never mount one image twice.
"""

import fcntl
import logging
import os
import re
import shutil
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path

from django.conf import settings
from django.utils.translation import gettext as _

from .base import BackendError, TransientBackendError

log = logging.getLogger(__name__)

IMAGE = "root.img"
HOME = "root"
LOCK = "home.lock"
GIB = 1024**3
# nosuid and nodev: nothing on the home can raise a privilege on the host side either.
MOUNT_OPTIONS = "nosuid,nodev,discard"
DETACH_WAIT = 3.0  # seconds for a stopped sandbox's mount namespace to let go of its loop device


def mode() -> str:
    """``LOCAL_HOME_QUOTA``: "auto", "on" or "off" (the settings refuse anything else)."""
    return str(settings.LOCAL_HOME_QUOTA).lower()


def unavailable() -> str:
    """Why this host cannot make image homes, or "" when it can."""
    if os.geteuid() != 0:
        return "loop mounts need root"
    if not Path("/dev/loop-control").exists():
        return "no /dev/loop-control (a container without loop devices)"
    for tool in ("mkfs.ext4", "mount", "umount", "truncate"):
        if not shutil.which(tool, path="/usr/sbin:/usr/bin:/sbin:/bin"):
            return f"{tool} is missing"
    return ""


@contextmanager
def _locked(base: Path):
    with open(base / LOCK, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def prepare(base: Path, uid: int, size_gb: int) -> int:
    """Mount the instance's home before its machine starts, making its image at the first start. Returns the size
    it is limited to in GB, or 0 when the home is a plain folder without a limit."""
    home, image = base / HOME, base / IMAGE
    home.mkdir(exist_ok=True)
    with _locked(base):
        if not image.exists():
            why = _why_a_folder(home)
            if why:
                _no_image(image, why)
                return 0
            if not _make_image(image, uid, size_gb):
                return 0
        _mount(image, home)
    return limit_gb(base)


def _why_a_folder(home: Path) -> str:
    """Why a home without an image stays (or becomes) a plain folder, or "" to make it an image."""
    if any(home.iterdir()):
        return "it already holds files (made before homes were images)"  # they stay where they are
    if mode() == "off":
        return "LOCAL_HOME_QUOTA is off"
    return unavailable()


def _make_image(image: Path, uid: int, size_gb: int) -> bool:
    """A new sparse image with an empty ext4 file system whose root belongs to the sandbox user, made beside the
    image's place and renamed into it: a half-made image is never found. False (and a warning) where this host
    cannot make or mount one; the home is then a plain folder."""
    try:
        make_ext4_image(image, uid, size_gb)
    except (OSError, TransientBackendError) as exc:
        return _no_image_after_failure(image, str(exc))
    try:
        _mount(image, image.with_name(HOME))
    except TransientBackendError as exc:
        image.unlink(missing_ok=True)
        return _no_image_after_failure(image, f"it could not be mounted ({exc})")
    # An empty home, as a plain folder would be: lost+found (root's, nobody's inside) is made again by e2fsck
    # when it needs one.
    shutil.rmtree(image.with_name(HOME) / "lost+found", ignore_errors=True)
    return True


def make_ext4_image(image: Path, uid: int, size_gb: int) -> None:
    """A new sparse image of ``size_gb`` GB with an empty ext4 file system whose root is ``uid``'s, made beside its
    place and renamed into it, so a half-made image is never found. Raises what failed (the staging file goes)."""
    staging = image.with_name(f".{image.name}.new")
    staging.unlink(missing_ok=True)
    # lazy_journal_init: the holes of a new sparse file already read as zeros, so the journal is not written out
    # (a 100 GB disk's would take 1 GB of the host's). -m 0: no blocks reserved for root, who is nobody inside.
    steps = [
        ["truncate", "-s", str(int(size_gb * GIB)), str(staging)],
        [
            "mkfs.ext4",
            "-q",
            "-F",
            "-m",
            "0",
            "-E",
            f"root_owner={uid}:{uid},lazy_itable_init=1,lazy_journal_init=1",
            str(staging),
        ],
    ]
    try:
        fd = os.open(staging, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        os.close(fd)
        for argv in steps:
            _run(argv)
        os.replace(staging, image)
    except BaseException:
        staging.unlink(missing_ok=True)
        raise


def _no_image_after_failure(image: Path, why: str) -> bool:
    """A home whose image could not be made or mounted on a host that can make them (no loop device free, the
    host's disk full) is not made a plain folder, which it would stay once the machine wrote to it: the start is
    tried again later. Only a host that cannot make images at all gets plain folders."""
    if not unavailable():
        raise TransientBackendError(f"the instance's system disk could not be made ready: {why}")
    _no_image(image, why)
    return False


def _no_image(image: Path, why: str) -> None:
    """Say in the log that the home has no size limit, or refuse the start where one is required."""
    if mode() == "on":
        log.warning("no image home for %s: %s", image.parent.name, why)
        raise BackendError(_("This host cannot limit the size of the instance's system disk."))
    log.warning("the home of sandbox %s is a plain folder without a size limit: %s", image.parent.name, why)


def ensure_mounted(base: Path, *, alive) -> None:
    """A running machine's image home mounted on the host too (a worker restarted after it was unmounted there):
    through the loop device the machine already uses, never a second one. ``alive()`` is asked again under the
    lock, so a stop that unmounted the home meanwhile is not undone by a mount nobody would take down."""
    image = base / IMAGE
    if image.exists() and not _is_mounted(base / HOME):
        with _locked(base):
            if alive() and not _is_mounted(base / HOME):
                _mount(image, base / HOME)


def unmount(base: Path) -> None:
    """The home's image unmounted and its loop device detached; call it once the machine's processes are gone.
    Idempotent; nothing to do for a plain-folder home."""
    image = base / IMAGE
    if not image.exists() and not _is_mounted(base / HOME):
        return
    with _locked(base):
        _unmount(image, base / HOME)


def delete(base: Path) -> None:
    """Release: the home unmounted, its image and its folder deleted."""
    home, image = base / HOME, base / IMAGE
    with _locked(base):
        _unmount(image, home)
        image.unlink(missing_ok=True)
        if not _is_mounted(home):  # never delete through a mount that would not go
            shutil.rmtree(home, ignore_errors=True)


@contextmanager
def opened(base: Path):
    """The home's files, for the host to read while the machine is stopped (its size, a snapshot): an image that
    is not mounted is mounted for the while and unmounted after; a start meanwhile waits for the lock."""
    home, image = base / HOME, base / IMAGE
    with _locked(base):
        borrowed = image.exists() and not _is_mounted(home)
        if borrowed:
            _mount(image, home)
        try:
            yield home
        finally:
            if borrowed:
                _unmount(image, home)


def limit_gb(base: Path) -> int:
    """The size the home is limited to, in GB; 0 for a plain folder."""
    try:
        return max(1, round((base / IMAGE).stat().st_size / GIB))
    except OSError:
        return 0


# Mounts ------------------------------------------------------------------------------------------------------


def _mount(image: Path, home: Path) -> None:
    if _is_mounted(home):
        return
    attached = loop_devices(image)
    if attached:
        # The image is still on a loop device (a machine's namespace holds it): mount that device, the same file
        # system, never the image again through a second one (two ext4 mounts of one image corrupt it).
        _run(["mount", "-o", MOUNT_OPTIONS, attached[0], str(home)])
    else:
        _run(["mount", "-o", f"loop,{MOUNT_OPTIONS}", str(image), str(home)])


def _unmount(image: Path, home: Path) -> None:
    if _is_mounted(home):
        done = subprocess.run(["umount", str(home)], capture_output=True, text=True, check=False)
        if done.returncode != 0:
            # Busy on the host (a shell of an operator's there): detach it now, the kernel frees it when let go.
            log.warning("umount %s: %s; detaching it lazily", home, done.stderr.strip()[:300])
            subprocess.run(["umount", "-l", str(home)], capture_output=True, check=False)
    # The loop device goes by itself (autoclear) once no mount namespace holds the file system; a stopped
    # sandbox's namespace goes a moment after its last process.
    deadline = time.monotonic() + DETACH_WAIT
    while loop_devices(image) and time.monotonic() < deadline:
        time.sleep(0.02)
    for device in loop_devices(image):
        log.warning("loop device %s still holds %s after the machine stopped", device, image)


def loop_devices(image: Path) -> list[str]:
    """The loop devices whose backing file is ``image``."""
    target = str(image.resolve()) if image.exists() else str(image)
    found = []
    for backing in Path("/sys/block").glob("loop*/loop/backing_file"):
        try:
            name = backing.read_text().strip()
        except OSError:
            continue
        if name == target:
            found.append(f"/dev/{backing.parent.parent.name}")
    return sorted(found)


def _is_mounted(path: Path) -> bool:
    """Whether ``path`` is a mount point of this mount namespace (octal escapes of /proc/self/mountinfo undone)."""
    with open("/proc/self/mountinfo") as info:
        points = {re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), line.split()[4]) for line in info}
    return str(path) in points


def _run(argv: list[str]) -> None:
    done = subprocess.run(
        argv, capture_output=True, text=True, check=False, env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}
    )
    if done.returncode != 0:
        log.warning("%s failed: %s", " ".join(argv), done.stderr.strip()[:500])
        raise TransientBackendError(_("The instance's system disk could not be mounted; trying again."))
