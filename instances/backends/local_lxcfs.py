"""The machine's own figures in ``/proc``: ``free``, ``top`` and ``uptime`` inside a sandbox read its memory limit,
its CPUs and its own uptime, not the host's.

lxcfs (a Debian package, the tool LXC and LXD use for this) is a FUSE file system that answers each reader with the
figures of the reader's cgroup. The local backend starts one lxcfs for the host, at ``LOCAL_LXCFS_DIR``, and binds
its files read-only over the sandbox's own ``/proc`` files. Where lxcfs is missing or cannot start (no FUSE), the
machine starts all the same and shows the host's figures there, as before.
"""

import errno
import fcntl
import logging
import os
import subprocess
import time
from pathlib import Path

from django.conf import settings

log = logging.getLogger(__name__)

LXCFS = "/usr/bin/lxcfs"
FILES = ("meminfo", "cpuinfo", "stat", "uptime", "diskstats", "swaps")


def mountpoint() -> Path:
    return Path(settings.LOCAL_LXCFS_DIR)


def _serving(root: Path) -> bool:
    try:
        return os.path.ismount(root) and (root / "proc" / "meminfo").stat().st_size >= 0
    except OSError:
        return False


def _stale(root: Path) -> bool:
    """Whether an lxcfs that is gone left its mount behind: every look at the folder then fails with "Transport
    endpoint is not connected" (``os.path.ismount`` says False there, so it cannot tell)."""
    try:
        os.stat(root)
    except OSError as exc:
        return exc.errno == errno.ENOTCONN
    return False


def ensure() -> Path | None:
    """The folder lxcfs serves, started if it is not yet (once per host: every machine reads the same one); None
    where it cannot run here."""
    root = mountpoint()
    root.parent.mkdir(parents=True, exist_ok=True)
    os.chmod(root.parent, 0o711)  # searchable only: the sandbox users reach the mount through it
    if _serving(root):
        return root
    if not Path(LXCFS).exists() or not Path("/dev/fuse").exists():
        return None
    with open(root.parent / f".{root.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two workers starting machines at once start one lxcfs
        if _serving(root):
            return root
        if _stale(root):
            # lxcfs is gone (killed, or crashed): its mount is detached and a new lxcfs serves the machines that start
            # from now on. Machines already running keep the dead files until they restart (free then fails there).
            log.warning("lxcfs at %s is gone (see %s): starting it again", root, log_file(root))
            subprocess.run(["umount", "-l", str(root)], capture_output=True, check=False)
        try:
            root.mkdir(exist_ok=True)
        except OSError as exc:
            log.warning("lxcfs cannot serve at %s (%s): machines show the host's memory and CPUs in /proc", root, exc)
            return None
        return _start(root)


def log_file(root: Path) -> Path:
    """Where lxcfs writes what it says (why it stopped, where it did)."""
    return root.parent / f".{root.name}.log"


def _start(root: Path) -> Path | None:
    os.chmod(root, 0o755)  # sandbox users bind its files: they search it; lxcfs itself allows them to read
    # --enable-cfs: cpuinfo and stat count the CPUs the machine's CPU quota gives it. setsid --fork: lxcfs
    # outlives the worker that started it, like the machines that read it.
    argv = ["setsid", "--fork", LXCFS, "--enable-cfs", "--pidfile", str(root.parent / f".{root.name}.pid"), str(root)]
    with open(log_file(root), "ab") as out:
        subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=out, cwd="/", check=False)
    for _attempt in range(50):
        if _serving(root):
            return root
        time.sleep(0.1)
    log.warning("lxcfs did not start at %s: machines show the host's memory and CPUs in /proc", root)
    return None


def bwrap_binds(root: Path | None) -> list[str]:
    """bubblewrap options that put lxcfs's files over the sandbox's ``/proc`` files (after ``--proc /proc``)."""
    if root is None:
        return []
    binds = []
    for name in FILES:
        try:
            os.stat(root / "proc" / name)
        except OSError:  # not served by this lxcfs, or lxcfs went away since: that file stays the host's
            continue
        binds += ["--ro-bind", str(root / "proc" / name), f"/proc/{name}"]
    return binds
