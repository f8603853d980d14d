"""A machine booted from an imported container image: the image's root file system as ``/`` under bubblewrap.

Everything else the sandbox guarantees stays as the runtime's root has it (namespaces, limits, seccomp, the
network rule, the home, the disks and mounts, the agent outside); only the root changes. The image's root is
shared by every machine booted from it and bound read-only; ``/tmp``, ``/var``, ``/run`` are tmpfs of their own,
and the generated ``hostname``, ``hosts`` and ``resolv.conf`` are bound over the image's.

The platform's pieces that run inside (the seccomp loader of a shell entering the machine, the step that gives the
start command its checkpoint signal back, ``setpriv`` and ``script``) are the host's programs, from the host's
``/usr`` bound read-only at :data:`HOST_USR` and started through the host's own dynamic loader: they never load
the image's C library or Python, and an image needs only ``/bin/sh`` for SSH and the web terminal.

The mount points bubblewrap needs are made in the image's root before the first boot (empty folders and files,
made without following anything in it): the root is read-only inside, where bubblewrap could not make them.
"""

import os
import re
import shlex
import stat
from pathlib import Path

from django.utils.translation import gettext as _

from .. import images
from .base import BackendError

HOST_USR = "/opt/gpucloud/host"  # inside: the host's /usr, read-only
# Folders bound or mounted over the image's root, and the /etc files generated for the machine.
MOUNT_DIRS = ("dev", "proc", "tmp", "var", "run", "root", "mnt/gpucloud", "opt/gpucloud")
ETC_FILES = ("hostname", "hosts", "resolv.conf")
# What the dynamic loader reads from /etc whoever runs it, the host's programs run inside included (before they
# drop the capabilities and set the seccomp filter): always empty, whatever the image holds there.
LOADER_FILES = ("ld.so.preload", "ld.so.cache")
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


class NoHostLoader(Exception):
    """The host's dynamic loader is not under /usr (a host without the merged /usr)."""


def host_loader() -> tuple[str, str]:
    """(loader, library folder) of the host's C library, as paths inside the machine."""
    for name in ("/lib64/ld-linux-x86-64.so.2", "/lib/ld-linux-aarch64.so.1"):
        real = os.path.realpath(name)
        if os.path.exists(real) and real.startswith("/usr/"):
            inside = f"{HOST_USR}/{real.removeprefix('/usr/')}"
            return inside, str(Path(inside).parent)
    raise NoHostLoader("the host's dynamic loader is not under /usr")


def host_program(path: str) -> list[str]:
    """The argv that runs the host's ``path`` (under /usr) inside the image's root, with the host's libraries."""
    loader, libraries = host_loader()
    real = os.path.realpath(path)
    return [loader, "--library-path", libraries, f"{HOST_USR}/{real.removeprefix('/usr/')}"]


def ready_root(slug: str) -> dict | None:
    """The imported image the variant ``slug`` boots, its root file system made ready to bind (the mount points
    made, every folder up to it searchable by the machine's user); None for any other image. The local and the
    Slurm backend both boot from it, the second on nodes that share the image store."""
    image = images.boot_root(slug)
    if image is None:
        return None
    if not Path(image["rootfs"]).is_dir():
        raise BackendError(_("The image's files are missing on this host; import it again."))
    prepare(image["rootfs"])
    make_traversable(Path(image["rootfs"]))
    return image


def make_traversable(path: Path) -> None:
    """``path`` and its parents searchable by every user: bwrap, as the sandbox user, walks to its folders.
    Search without read: nobody can list them."""
    path.mkdir(parents=True, exist_ok=True)
    for each in (path, *path.parents):
        mode = each.stat().st_mode
        if mode & 0o001 == 0:
            os.chmod(each, mode | 0o001)


def prepare(rootfs: str) -> None:
    """Make the mount points bubblewrap needs in the image's root (a symlink in their place is replaced: inside,
    it would lead the mount elsewhere)."""
    root = os.open(rootfs, DIRECTORY)
    try:
        for path in MOUNT_DIRS:
            _ensure(root, path.split("/"), directory=True)
        for name in (*ETC_FILES, *LOADER_FILES):
            _ensure(root, ["etc", name], directory=False)
    finally:
        os.close(root)


def make_mount_point(rootfs: str, path: str) -> None:
    """An empty folder at the absolute ``path`` in the image's root, made as :func:`prepare` makes its own: where
    bubblewrap binds a folder of the host at the same path."""
    root = os.open(rootfs, DIRECTORY)
    try:
        _ensure(root, [part for part in path.split("/") if part], directory=True)
    finally:
        os.close(root)


def _ensure(root: int, parts: list[str], *, directory: bool) -> None:
    fd = os.dup(root)
    try:
        for index, name in enumerate(parts):
            last = index == len(parts) - 1
            want_dir = directory or not last
            try:
                info = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except FileNotFoundError:
                info = None
            wanted = stat.S_ISDIR if want_dir else stat.S_ISREG
            if info is not None and not wanted(info.st_mode):
                if stat.S_ISDIR(info.st_mode):
                    return  # a folder where a file is generated: left as it is (bwrap refuses to bind over it)
                os.unlink(name, dir_fd=fd)  # a symlink (or anything else): it would lead the mount elsewhere
                info = None
            if info is None:
                _make(fd, name, directory=want_dir)
            if want_dir:
                child = os.open(name, DIRECTORY, dir_fd=fd)
                os.close(fd)
                fd = child
    finally:
        os.close(fd)


def _make(dir_fd: int, name: str, *, directory: bool) -> None:
    """An empty folder or file readable by the machine's user, whatever the worker's umask."""
    try:
        if directory:
            os.mkdir(name, 0o755, dir_fd=dir_fd)
            made = os.open(name, DIRECTORY, dir_fd=dir_fd)
        else:
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
            made = os.open(name, flags, 0o644, dir_fd=dir_fd)
    except FileExistsError:
        return  # another machine booting from the image made it a moment ago
    try:
        os.fchmod(made, 0o755 if directory else 0o644)
    finally:
        os.close(made)


def root_binds(rootfs: str, etc: Path, run_mb: int) -> list[str]:
    """bwrap's arguments that make the image's root the machine's ``/`` (in place of the host's ``/usr`` and the
    generated ``/etc``), with the host's ``/usr`` out of the way at :data:`HOST_USR`."""
    argv = ["--ro-bind", rootfs, "/", "--size", str(run_mb * 1024 * 1024), "--tmpfs", "/opt/gpucloud"]
    argv += ["--ro-bind", "/usr", HOST_USR]
    for name in ETC_FILES:
        argv += ["--ro-bind-try", str(etc / name), f"/etc/{name}"]
    for name in LOADER_FILES:
        argv += ["--ro-bind", "/dev/null", f"/etc/{name}"]
    return argv


def search_path(config: dict) -> str:
    """The image's PATH (its env's), else the usual one."""
    return next((item[5:] for item in config.get("env", []) if item.startswith("PATH=")), DEFAULT_PATH)


def environment(config: dict) -> dict[str, str]:
    """The image's env as variables (the platform's and the user's are added after it, and win). Names a shell
    cannot export are left out, and so are the dynamic loader's (``LD_…``), which the host's programs run inside
    would obey."""
    pairs = (item.partition("=") for item in config.get("env", []) if isinstance(item, str))
    return {name: value for name, _sep, value in pairs if ENV_NAME.match(name) and not name.startswith("LD_")}


def default_start(config: dict) -> str:
    """The image's ENTRYPOINT and CMD as the start command, run in its working folder."""
    command = [*(config.get("entrypoint") or []), *(config.get("cmd") or [])]
    lines = ["# The image's own command (its ENTRYPOINT and CMD)."]
    if config.get("working_dir"):
        lines.append(f"cd {shlex.quote(config['working_dir'])}")
    lines.append(f"exec {shlex.join(command)}" if command else "exec /bin/sh")
    return "\n".join(lines)


# The first process of a machine booted from an image: the image's /bin/sh, with nothing of the runtime (no hub
# relay, and no JupyterLab of the runtime's: their Python is the host's). An image that has JupyterLab runs its own,
# in a session of its own (the host's setsid), on the socket the console's proxy reaches. The start command gets
# SIGUSR1's default action back through the host's Python; the machine ends when its start command (and the image's
# JupyterLab, if it runs one) has ended, with the start command's exit status (what the agent reports, and a job's
# result on a cluster).
INIT_SCRIPT = """\
. /opt/gpucloud/boot/env
mkdir -p /root/.gpucloud 2>/dev/null
for name in data shared shared-team public datasets; do
  [ -d "/mnt/gpucloud/$name" ] || continue
  [ -e "/root/$name" ] || [ -L "/root/$name" ] || ln -s "/mnt/gpucloud/$name" "/root/$name" 2>/dev/null
done
{lab}\
{python} -I -S -c 'import os, signal as s, sys; s.signal(s.SIGUSR1, s.SIG_DFL); os.execv(sys.argv[1], sys.argv[1:])' \\
  /bin/sh /opt/gpucloud/boot/start 2>&1
status=$?
echo "== start command exited with status $status =="
{end}exit $status
"""


def init_script(python: str, *, lab: str = "") -> str:
    """The init of an image's machine; ``lab``: the lines that start the image's JupyterLab (:func:`lab_lines`)."""
    return INIT_SCRIPT.format(python=shlex.join(host_program(python)), lab=lab, end="wait\n" if lab else "")


def lab_lines(jupyter_lab: str, base_url: str, socket: str) -> str:
    """Start the image's own ``jupyter-lab`` (the path the import found) on ``socket`` under ``base_url``, with the
    machine's token (``JUPYTER_TOKEN``, from the boot environment) and the home as its folder."""
    argv = [
        *host_program("/usr/bin/setsid"),
        jupyter_lab,
        "--no-browser",
        "--allow-root",
        f"--ServerApp.sock={socket}",
        "--ServerApp.sock_mode=0600",
        f"--ServerApp.base_url={base_url}",
        "--ServerApp.root_dir=/root",
    ]
    return f"{shlex.join(argv)} >/run/gpucloud/jupyter.log 2>&1 &\n"


def exposed_ports(config: dict) -> list[int]:
    """The TCP ports the image's config exposes (``"8080/tcp"``, ``"8080"``), as numbers."""
    ports = set()
    for item in config.get("exposed_ports") or []:
        number, _sep, protocol = str(item).partition("/")
        if number.isdigit() and 0 < int(number) < 65536 and protocol in ("", "tcp"):
            ports.add(int(number))
    return sorted(ports)
