"""A folder on a file system of a fixed size, for unpacking an image whose layers may decompress to far more than
they say (a gzip bomb): the unpack fails with "no space left" inside it instead of filling the host's disk.

The space is a sparse ext4 image the size of the allowance (``local_home.make_ext4_image``, the mechanism the local
backend's homes use), loop-mounted ``nosuid,nodev`` for the length of the unpack and deleted after; the host gives
it only the blocks really written. Where this host cannot loop-mount (not root, a container without loop devices)
the folder is a plain one and the unpacked size is checked only after the unpack, as the log says.

A worker killed in the middle of an unpack leaves its space mounted. Each space holds a lock on a file in its
folder for as long as it is in use, so the next unpack beside it unmounts and removes those whose lock nobody
holds any more (:func:`clear_abandoned`).
"""

import fcntl
import logging
import os
import shutil
import subprocess
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

from instances.backends import local_home

log = logging.getLogger(__name__)

MIB = 1024**2
# ext4's own metadata (inode tables, the journal) takes room the files cannot use.
OVERHEAD = 64 * MIB
MOUNT_OPTIONS = "loop,nosuid,nodev"
PREFIX = ".bounded-"
IN_USE = "in-use"  # the lock file a space's user holds
# A space younger than this without its lock file is being made, not abandoned.
MAKING_SECONDS = 60


class Unavailable(Exception):
    """This host cannot make a bounded space."""


def _run(argv: list[str]) -> None:
    done = subprocess.run(
        argv, capture_output=True, text=True, check=False, env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}
    )
    if done.returncode != 0:
        raise OSError(f"{argv[0]}: {done.stderr.strip()[:300]}")


@contextmanager
def space(beside: Path, limit: int):
    """A folder (yielded) where at most about ``limit`` bytes fit, made under ``beside`` and removed after."""
    why = local_home.unavailable()
    beside.mkdir(parents=True, exist_ok=True)
    clear_abandoned(beside)
    with tempfile.TemporaryDirectory(prefix=PREFIX, dir=beside) as work, open(Path(work) / IN_USE, "w") as in_use:
        fcntl.flock(in_use, fcntl.LOCK_EX)
        folder = Path(work) / "space"
        folder.mkdir()
        if why:
            log.warning("unpacking without a size limit on this host: %s", why)
            yield folder
            return
        image = Path(work) / "space.img"
        local_home.make_ext4_image(image, 0, (limit * 1.05 + OVERHEAD) / local_home.GIB)
        _run(["mount", "-o", MOUNT_OPTIONS, str(image), str(folder)])
        try:
            shutil.rmtree(folder / "lost+found", ignore_errors=True)
            yield folder
        finally:
            subprocess.run(["umount", str(folder)], capture_output=True, check=False)
            image.unlink(missing_ok=True)


def clear_abandoned(beside: Path) -> int:
    """Unmount and remove the spaces under ``beside`` that nobody uses any more (their maker was killed); how many."""
    cleared = 0
    for work in beside.glob(f"{PREFIX}*"):
        # A space is being made until its folder is there (its maker locks first, then makes the folder): one
        # younger than a minute without its folder is left alone, locked or not yet.
        try:
            if not (work / "space").exists() and time.time() - work.stat().st_mtime < MAKING_SECONDS:
                continue
        except FileNotFoundError:
            continue  # gone meanwhile
        try:
            fd = os.open(work / IN_USE, os.O_RDWR)
        except FileNotFoundError:
            fd = None  # from before the lock file was written
        except OSError:
            continue
        try:
            if fd is not None:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    continue  # in use
            # Detached at once even if something still holds it open; the loop device goes with the last user.
            subprocess.run(["umount", "--lazy", str(work / "space")], capture_output=True, check=False)
            shutil.rmtree(work, ignore_errors=True)
            log.warning("removed an unpacking space its worker left: %s", work)
            cleared += 1
        finally:
            if fd is not None:
                os.close(fd)
    return cleared


def copy_out(source: Path, target: Path) -> None:
    """``source``'s tree copied to ``target`` as it is (modes, owners, links, hard links), never following a link."""
    _run(["cp", "-a", "--no-dereference", "--no-target-directory", str(source), str(target)])
