"""A folder on a file system of a fixed size, for unpacking an image whose layers may decompress to far more than
they say (a gzip bomb): the unpack fails with "no space left" inside it instead of filling the host's disk.

The space is a sparse ext4 image the size of the allowance (``local_home.make_ext4_image``, the mechanism the local
backend's homes use), loop-mounted ``nosuid,nodev`` for the length of the unpack and deleted after; the host gives
it only the blocks really written. Where this host cannot loop-mount (not root, a container without loop devices)
the folder is a plain one and the unpacked size is checked only after the unpack, as the log says.
"""

import logging
import shutil
import subprocess
import tempfile
from contextlib import contextmanager
from pathlib import Path

from instances.backends import local_home

log = logging.getLogger(__name__)

MIB = 1024**2
# ext4's own metadata (inode tables, the journal) takes room the files cannot use.
OVERHEAD = 64 * MIB
MOUNT_OPTIONS = "loop,nosuid,nodev"


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
    with tempfile.TemporaryDirectory(prefix=".bounded-", dir=beside) as work:
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


def copy_out(source: Path, target: Path) -> None:
    """``source``'s tree copied to ``target`` as it is (modes, owners, links, hard links), never following a link."""
    _run(["cp", "-a", "--no-dereference", "--no-target-directory", str(source), str(target)])
