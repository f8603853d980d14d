"""An imported image's root file system, read and made safe on the host without ever following a link in it.

The files come from whoever built the image, so every host-side read goes through directory descriptors opened with
``O_NOFOLLOW`` and ``lstat``-style calls: a symlink to ``/etc/shadow`` or ``../../..`` is a symlink, left as it is
for the sandbox, where it resolves inside the image's own root. After unpacking, setuid and setgid bits are cleared
and device nodes removed (nothing inside a sandbox may gain privileges or reach a host device through them).
Paths the checks look up (``/bin/sh``, ``python3`` on the image's PATH) are resolved the way the sandbox will
resolve them: symlinks followed within the image's root, ``..`` stopping at it.
"""

import os
import posixpath
import stat
from collections.abc import Iterable
from dataclasses import dataclass, field

from catalog.choices import Backend

MAX_DEPTH = 256
MAX_LINKS = 40
DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
PRIVILEGE_BITS = stat.S_ISUID | stat.S_ISGID
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# The library each chip family's software stack links against, in the order a suggestion prefers them: an image
# carrying a domestic stack beside CUDA (a migration image) is suggested as the domestic one.
FAMILY_LIBRARIES = (
    (Backend.NPU, ("libascendcl.so",)),
    (Backend.MLU, ("libcnrt.so",)),
    (Backend.DCU, ("libamdhip64.so", "libhiprtc.so", "librocm")),
    (Backend.CUDA, ("libcudart.so",)),
)


class TooLarge(Exception):
    """The unpacked files pass the size allowed."""


class TooDeep(Exception):
    """Folders nested deeper than any real image's."""


@dataclass
class Scan:
    """What a pass over the files found and changed."""

    size: int = 0
    cleared: list[str] = field(default_factory=list)  # files whose setuid/setgid bits were removed
    removed: list[str] = field(default_factory=list)  # device nodes removed
    families: set[str] = field(default_factory=set)  # chip families whose libraries are present
    seen: set[tuple[int, int]] = field(default_factory=set, repr=False)  # hard-linked files counted once


def neutralise(root: str, *, limit: int) -> Scan:
    """Walk the files under ``root`` (never through a symlink): clear setuid/setgid bits, remove device nodes, add
    up the size (refusing past ``limit`` bytes) and note the chip families' libraries."""
    scan = Scan()
    fd = os.open(root, DIRECTORY)
    try:
        _walk(fd, "", scan, limit, 0)
    finally:
        os.close(fd)
    return scan


def _walk(dir_fd: int, prefix: str, scan: Scan, limit: int, depth: int) -> None:
    if depth > MAX_DEPTH:
        raise TooDeep(prefix)
    with os.scandir(dir_fd) as entries:
        names = [entry.name for entry in entries]
    for name in names:
        info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        path = f"{prefix}/{name}"
        if stat.S_ISDIR(info.st_mode):
            child = os.open(name, DIRECTORY, dir_fd=dir_fd)
            try:
                _walk(child, path, scan, limit, depth + 1)
            finally:
                os.close(child)
        elif stat.S_ISREG(info.st_mode):
            _regular(dir_fd, name, path, info, scan)
            if scan.size > limit:
                raise TooLarge(scan.size)
        elif stat.S_ISCHR(info.st_mode) or stat.S_ISBLK(info.st_mode):
            os.unlink(name, dir_fd=dir_fd)
            scan.removed.append(path)


def _regular(dir_fd: int, name: str, path: str, info: os.stat_result, scan: Scan) -> None:
    key = (info.st_dev, info.st_ino)
    if key not in scan.seen:
        scan.seen.add(key)
        scan.size += info.st_size
    if info.st_mode & PRIVILEGE_BITS:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
        try:
            os.fchmod(fd, stat.S_IMODE(info.st_mode) & ~PRIVILEGE_BITS)
        finally:
            os.close(fd)
        scan.cleared.append(path)
    for family, prefixes in FAMILY_LIBRARIES:
        if name.startswith(prefixes):
            scan.families.add(family)


def suggested_family(families: Iterable[str]) -> str:
    """The chip family the libraries suggest ("" for none: a CPU image)."""
    found = set(families)
    return next((family for family, _prefixes in FAMILY_LIBRARIES if family in found), "")


def lookup(root: str, path: str) -> os.stat_result | None:
    """The file ``path`` names inside the image, resolved as the sandbox resolves it (symlinks within the image's
    root, ``..`` stopping at it), without following anything on the host; None when there is none."""
    found = _resolve(root, path)
    return found[1] if found else None


def resolve(root: str, path: str) -> str | None:
    """Where ``path`` leads inside the image once its symlinks are followed there (as :func:`lookup`), or None."""
    found = _resolve(root, path)
    return "/" + "/".join(found[0]) if found else None


def entries(root: str, path: str) -> list[str]:
    """The names in the folder ``path`` inside the image (resolved as :func:`lookup`); none when it is not one."""
    found = _resolve(root, path)
    if found is None or not stat.S_ISDIR(found[1].st_mode):
        return []
    root_fd = os.open(root, DIRECTORY)
    try:
        fd = _open_in(root_fd, found[0])
    finally:
        os.close(root_fd)
    try:
        listed = os.open(".", DIRECTORY, dir_fd=fd)
    finally:
        os.close(fd)
    try:
        return os.listdir(listed)
    finally:
        os.close(listed)


def _resolve(root: str, path: str) -> tuple[list[str], os.stat_result] | None:
    parts = [p for p in path.split("/") if p not in ("", ".")]
    resolved: list[str] = []
    links = 0
    info = None
    root_fd = os.open(root, DIRECTORY)
    try:
        while parts:
            name = parts.pop(0)
            if name == "..":
                resolved = resolved[:-1]
                continue
            info = _lstat_in(root_fd, resolved, name)
            if info is None:
                return None
            if stat.S_ISLNK(info.st_mode):
                links += 1
                if links > MAX_LINKS:
                    return None
                target = _readlink_in(root_fd, resolved, name)
                if target.startswith("/"):
                    resolved = []
                parts = [p for p in target.split("/") if p not in ("", ".")] + parts
                continue
            if parts and not stat.S_ISDIR(info.st_mode):
                return None
            resolved.append(name)
        return (resolved, info) if resolved else (resolved, os.fstat(root_fd))
    finally:
        os.close(root_fd)


def _open_in(root_fd: int, resolved: list[str]) -> int:
    fd = os.dup(root_fd)
    for name in resolved:
        try:
            child = os.open(name, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
        finally:
            os.close(fd)
        fd = child
    return fd


def _lstat_in(root_fd: int, resolved: list[str], name: str) -> os.stat_result | None:
    try:
        fd = _open_in(root_fd, resolved)
    except OSError:
        return None
    try:
        return os.stat(name, dir_fd=fd, follow_symlinks=False)
    except OSError:
        return None
    finally:
        os.close(fd)


def _readlink_in(root_fd: int, resolved: list[str], name: str) -> str:
    fd = _open_in(root_fd, resolved)
    try:
        return os.readlink(name, dir_fd=fd)
    finally:
        os.close(fd)


def executable(root: str, path: str) -> bool:
    info = lookup(root, path)
    return info is not None and stat.S_ISREG(info.st_mode) and bool(info.st_mode & 0o111)


def on_path(root: str, command: str, env: Iterable[str]) -> str:
    """Where ``command`` is on the image's PATH (its env's, else the usual one), or ""."""
    search = next((item[5:] for item in env if item.startswith("PATH=")), DEFAULT_PATH)
    for folder in search.split(":"):
        if folder.startswith("/") and executable(root, f"{folder}/{command}"):
            return f"{folder}/{command}"
    return ""


def lab_opens_ports(root: str, lab: str) -> bool:
    """Whether jupyter-server-proxy sits beside the image's JupyterLab (``lab``: where ``jupyter-lab`` was found), in
    a ``lib/python3*/{site,dist}-packages`` of the prefix its real file is in (``/opt/conda/bin/jupyter-lab`` →
    ``/opt/conda``): the port panel's buttons open ports through it."""
    real = resolve(root, lab) if lab else None
    if real is None:
        return False
    lib = posixpath.join(posixpath.dirname(posixpath.dirname(real)), "lib")
    for version in entries(root, lib):
        for packages in ("site-packages", "dist-packages") if version.startswith("python3") else ():
            info = lookup(root, f"{lib}/{version}/{packages}/jupyter_server_proxy")
            if info is not None and stat.S_ISDIR(info.st_mode):
                return True
    return False


def checks(root: str, env: list[str], families: Iterable[str]) -> dict:
    """What the image's files hold that the console cares about: a shell (SSH and the terminal need one), Python and
    JupyterLab (the lab button) with jupyter-server-proxy (the port buttons), and the chip family its libraries
    suggest."""
    lab = on_path(root, "jupyter-lab", env)
    return {
        "shell": executable(root, "/bin/sh"),
        "python": on_path(root, "python3", env),
        "jupyterlab": lab,
        "lab_ports": lab_opens_ports(root, lab),
        "families": sorted(families),
        "family": suggested_family(families),
    }
