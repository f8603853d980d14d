"""A Slurm machine booted from an imported container image: the image's root file system as ``/`` on the node,
under the same bubblewrap sandbox the local backend builds for it (:mod:`.local_image`), started by the instance's
agent as its workload.

**Why bubblewrap on the node and not Slurm's own OCI support** (``--container`` with crun or runc, 22.05): Slurm
runs a container only through an ``oci.conf`` the operator writes on every node and a runtime installed there (the
local cluster and Debian's packages have neither), and it then runs the batch script itself inside the container, so
the agent (heartbeats, the checkpoint signal, the log) would run on the image's C library and Python, or not at all.
bwrap needs nothing of Slurm's configuration and nothing but Debian's ``bubblewrap`` on the nodes; the agent stays
outside on the node's own Python; and the machine gets every guarantee the local backend's has, built by the same
code and tested once: its own user, PID, IPC, UTS, mount and network namespaces, the seccomp filter, the image's
root read-only, ``/tmp``, ``/var`` and ``/run`` of fixed sizes, no further user namespaces, the host's ``/usr`` for
the platform's programs inside (:data:`.local_image.HOST_USR`). A shell enters it from a step of the job
(``srun --overlap``) through the agent's ``--enter``, with the local backend's steps after it.

What it needs of the nodes: bubblewrap, unprivileged user namespaces (Debian's default), the console's
distribution (the host's loader and Python are named by their paths on the console's host), the zone's shared
root, and the console's image store (``IMAGE_IMPORT_ROOT``) at the zone's ``image_root`` (``SLURM_IMAGE_ROOT``,
by default the same path: the local cluster's node is the console's host).

Its files, all on the zone's shared root:

* ``boot/<public id>/``: written by the console at each start, root's and readable by the instance's account only
  (neither the machine nor its account can change what a start runs): the machine's environment (``env``: the
  image's, the platform's and the owner's variables and secrets), the first process (``init``), the start command
  (``start``), the seccomp program, bwrap's options (read from a descriptor, so no host path shows in ``/proc``
  inside) and the generated ``/etc`` files;
* ``instances/<public id>/root``: the system disk's home, bound at ``/root``;
* ``instances/<public id>/.gpucloud/sandbox.json``: what bwrap says of the sandbox (``--info-fd``), written by
  the job: the pid of its first process, which a shell joins.

The zone's folders of data disks and storage are bound at their own paths (:func:`data_folders`), so the agent's
links in the home work inside as on the node. The device files of the job's cards (the zone's ``card_devices``)
are bound into bwrap's own ``/dev``, those of no other card. The zone's folder of mounted hub items is bound
read-only (:mod:`.slurm_hub`: each instance's copy is its account's alone to read), so the hub's links in the home
lead to their files inside too. Not yet inside such a machine: outbound network (its network is its loopback) and
JupyterLab (the image's Python is not the platform's, as on the local backend).
"""

import os
import shlex
import shutil
import stat
from pathlib import Path

from django.conf import settings
from django.utils.translation import gettext as _

from agent import gpucloud_agent as agent_module

from ..environment import boot_environment
from . import local_etc, local_image, local_network, local_seccomp, slurm_hub
from .base import BackendError

BWRAP = "/usr/bin/bwrap"
BOOT = "boot"  # under the zone's root: a folder per instance
BOOT_DIR = "/opt/gpucloud/boot"  # inside, read-only
ETC = "etc"
ARGS = "bwrap.args"
SECCOMP = "seccomp.bpf"
SANDBOX_INFO = ".gpucloud/sandbox.json"  # under the system disk
MIB = 1024 * 1024
OPEN_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def node_rootfs(config: dict, rootfs: str) -> str:
    """Where the nodes see the image's root: its path under ``IMAGE_IMPORT_ROOT`` on the console's host, under the
    zone's ``image_root`` on the nodes (the same path when unset)."""
    store = Path(settings.IMAGE_IMPORT_ROOT)
    try:
        relative = Path(rootfs).relative_to(store)
    except ValueError as exc:
        raise BackendError(f"the image's root {rootfs} is not in the image store {store}") from exc
    return str(Path(config.get("image_root") or store) / relative)


def host_python(config: dict) -> str:
    """The nodes' Python (the agent's) by its full path, as the machine's programs from the host name it."""
    python = config.get("agent_python") or "python3"
    return shutil.which(python) or python


def data_folders(config: dict) -> tuple[Path, ...]:
    """The zone's folders of data disks and of the owners' storage, bound in the machine where the nodes have them:
    the links the agent makes in the home (``/root/data/<name>``, ``/root/shared``) lead to them inside too, a disk
    hot-plugged while the machine runs included. Every disk and storage folder in them is its own account's (0700),
    so a machine opens its owner's alone."""
    root = Path(config["root"])
    return root / "disks", Path(config.get("shared_root") or root / "shared")


def boot_folder(config: dict, public_id) -> Path:
    return Path(config["root"]) / BOOT / str(public_id)


def hostname(instance) -> str:
    return f"gpu-{instance.public_id.hex[:8]}"


def write_boot(instance, config: dict, image: dict, system: Path, group: int | None) -> Path:
    """The instance's boot folder written afresh (see the module's docstring); ``group``: the gid of the account
    that may read it (None: the console's own files, for the shared account)."""
    why = local_seccomp.unavailable()
    if why:
        raise BackendError(why)
    for data in data_folders(config):
        local_image.make_mount_point(image["rootfs"], str(data))
    local_image.make_mount_point(image["rootfs"], str(slurm_hub.ensure_hub_folder(config)))
    folder = _fresh_folder(Path(config["root"]), str(instance.public_id), group)
    boot = {
        "env": _environment(instance, image),
        "init": local_image.init_script(host_python(config)),
        "start": (instance.start_command or local_image.default_start(image)) + "\n",
        SECCOMP: local_seccomp.program(),
        ARGS: b"".join(arg.encode() + b"\0" for arg in _bwrap_options(instance, config, image, system, folder)),
    }
    etc = local_etc.files_for(hostname(instance))
    try:
        for name, data in boot.items():
            _write(folder.fd, name, data, group)
        os.mkdir(ETC, 0o750, dir_fd=folder.fd)
        etc_fd = os.open(ETC, OPEN_FOLDER, dir_fd=folder.fd)
        try:
            _hand_over(etc_fd, group, 0o750)
            for name in local_image.ETC_FILES:
                _write(etc_fd, name, etc[name], group)
        finally:
            os.close(etc_fd)
    finally:
        os.close(folder.fd)
    return folder.path


def remove_boot(config: dict, public_id) -> None:
    shutil.rmtree(boot_folder(config, public_id), ignore_errors=True)


def _environment(instance, image: dict) -> str:
    """The machine's variables: the image's, under the platform's, under the owner's (variables and secrets)."""
    platform = {
        "PYTHONUNBUFFERED": "1",
        "GPUCLOUD_INSTANCE": str(instance.public_id),
        "GPUCLOUD_SCALARS": f"/root/{agent_module.SCALARS_FILE}",
        "GPUCLOUD_CHECKPOINT_MARKER": f"/root/{agent_module.MARKER}",
        "GPUCLOUD_NETWORK": "loopback",
    }
    variables = {**local_image.environment(image), **platform, **boot_environment(instance)}
    return "".join(f"export {name}={shlex.quote(value)}\n" for name, value in variables.items())


def _bwrap_options(instance, config: dict, image: dict, system: Path, boot) -> list[str]:
    """bwrap's options, as the local backend gives a machine booted from an image, with the node's paths."""
    run_mb = int(settings.LOCAL_RUN_MB)
    rootfs = node_rootfs(config, image["rootfs"])
    groups = [
        ("--unshare-user", "--uid", "0", "--gid", "0", "--unshare-pid", "--unshare-ipc", "--unshare-uts"),
        ("--unshare-net", "--die-with-parent", "--disable-userns", "--hostname", hostname(instance)),
        local_network.BWRAP_CAP_DROPS,
        local_image.root_binds(rootfs, boot.path / ETC, run_mb),
        ("--dev", "/dev", "--size", str(int(settings.LOCAL_SHM_MB) * MIB), "--tmpfs", "/dev/shm"),
        ("--proc", "/proc"),  # /dev is made read-only after the cards' devices are bound in it (workload)
        ("--size", str(int(settings.LOCAL_TMP_MB) * MIB), "--tmpfs", "/tmp"),
        ("--size", str(int(settings.LOCAL_VAR_MB) * MIB), "--tmpfs", "/var", "--dir", "/var/tmp"),
        ("--size", str(run_mb * MIB), "--tmpfs", "/run"),
        ("--bind", str(system / "root"), "/root", "--ro-bind", str(boot.path), BOOT_DIR),
        *(("--bind", str(folder), str(folder)) for folder in data_folders(config)),
        ("--ro-bind", str(slurm_hub.hub_folder(config)), str(slurm_hub.hub_folder(config))),
        ("--clearenv",),
        ("--setenv", "HOME", "/root", "--setenv", "USER", "root", "--setenv", "SHELL", "/bin/sh"),
        ("--setenv", "LANG", "C.UTF-8", "--setenv", "PATH", local_image.search_path(image)),
        ("--chdir", "/root", "--seccomp", "4", "--remount-ro", "/"),
    ]
    return [argument for group in groups for argument in group]


def workload(instance, config: dict, system: Path, devices: list[str] = (), offset: int = 0) -> list[str]:
    """What the agent runs as the workload: bwrap with its options (descriptor 3) and seccomp program (4), telling
    where the sandbox's first process is (5). The cards the agent picked (the family's visibility variable) are
    passed in, and so are their device files (``devices``, :func:`device_binds`; ``offset``: the node's first GRES
    index of the chip's type), before ``/dev`` is made read-only. bwrap and the machine's first process ignore
    SIGUSR1 on the way in, so the checkpoint signal the agent passes to its process group ends neither; the start
    command gets the default action back (``init``)."""
    boot = boot_folder(config, instance.public_id)
    family = instance.chip.backend if instance.chip_id else "cpu"
    variable = agent_module.VISIBILITY_VARIABLES.get(family)
    cards = f'--setenv {variable} "${variable}" ' if variable else ""
    line = (
        f"trap '' USR1; {device_binds(devices, offset)}"
        f'exec /usr/bin/env -i {BWRAP} --args 3 "$@" --remount-ro /dev '
        f"--info-fd 5 {cards}-- /bin/sh {BOOT_DIR}/init "
        f"3<{shlex.quote(str(boot / ARGS))} 4<{shlex.quote(str(boot / SECCOMP))} "
        f"5>{shlex.quote(str(system / SANDBOX_INFO))}"
    )
    return ["/bin/sh", "-c", line]


def device_binds(devices, offset: int = 0) -> str:
    """Shell that sets bwrap's device binds as the positional parameters: for each card Slurm gave the job
    (``SLURM_JOB_GPUS``: the cards' GRES indexes on the node), each pattern with ``{index}`` or ``{gres_index}``
    bound at its own path, and the patterns with neither (a driver's control devices) once, where they exist.
    ``{index}`` is the card's number among the node's cards of its type, as the agent's visibility variable counts
    and a vendor's driver numbers its devices: the GRES index less ``offset``, unless an index is below it and so
    counted per type already; ``{gres_index}`` is the GRES index itself. A card index that is not a number, or no
    card index at all, stops the machine before it starts."""
    per_card = [pattern for pattern in devices if "{index}" in pattern or "{gres_index}" in pattern]
    shared = [pattern for pattern in devices if pattern not in per_card]
    script = "set --; "
    if per_card:
        paths = [_card_path(pattern) for pattern in per_card]
        binds = " ".join(f"--dev-bind {path} {path}" for path in paths)
        cards = "$(printf %s \"$SLURM_JOB_GPUS\" | tr , ' ')"
        script += (
            '[ -n "$SLURM_JOB_GPUS" ] || { echo "the job was given no card indexes (SLURM_JOB_GPUS)" >&2; exit 70; }; '
            # As the agent counts them: indexes below the offset are already counted per type, and kept.
            f"off={int(offset)}; for i in {cards}; do "
            'case $i in *[!0-9]*|0?*) echo "bad card index $i" >&2; exit 70;; esac; '
            '[ "$i" -lt "$off" ] && off=0; done; '
            f'for i in {cards}; do j=$((i - off)); set -- "$@" {binds}; done; '
        )
    if shared:
        binds = " ".join(f"--dev-bind-try {shlex.quote(path)} {shlex.quote(path)}" for path in shared)
        script += f'set -- "$@" {binds}; '
    return script


def _card_path(pattern: str) -> str:
    """A per-card pattern as a shell word: ``{gres_index}`` as ``$i``, ``{index}`` as ``$j``, the rest quoted."""
    words = []
    for part in pattern.split("{gres_index}"):
        words.append("$j".join(shlex.quote(piece) for piece in part.split("{index}")))
    return "$i".join(words)


def enter_command(image: dict, system: Path, agent: list[str], command: list[str]) -> list[str]:
    """What a step of the job runs to put ``command`` inside the machine: the sandbox's first process read from
    bwrap's note, then the steps of the local backend's shell: into its namespaces (the agent's ``--enter``: an
    unprivileged account cannot use nsenter for a sandbox made with ``--disable-userns``), every capability dropped,
    the seccomp filter loaded by the host's Python, a clean environment with the caller's TERM and the machine's
    variables, script(1) on a terminal. ``agent``: the argv that runs the agent on the node."""
    host = local_image.host_program
    on_a_pty = 'if [ -t 0 ]; then exec {script} -qefc "$1" /dev/null; fi; shift; exec "$@"'.format(
        script=shlex.join(host("/usr/bin/script"))
    )
    python = shutil.which(agent[0]) or agent[0]
    variables = ["HOME=/root", "USER=root", "LOGNAME=root", "SHELL=/bin/sh", "LANG=C.UTF-8"]
    inner = [
        *("/usr/bin/env", "-i", *variables, f"PATH={local_image.search_path(image)}"),
        *(*agent, "--enter", "$pid"),
        *host("/usr/bin/setpriv"),
        *("--bounding-set=-all", "--inh-caps=-all", "--no-new-privs", "--"),
        *host(python),
        *("-I", "-S", "-c", local_seccomp.LOADER, f"{BOOT_DIR}/{SECCOMP}"),
        *("/bin/sh", "-c", f'export TERM="$0"; cd /root; . {BOOT_DIR}/env; {on_a_pty}'),
    ]
    quoted = " ".join('"$pid"' if part == "$pid" else shlex.quote(part) for part in inner)
    info = shlex.quote(str(system / SANDBOX_INFO))
    find = f"pid=$(sed -n 's/^ *\"child-pid\": *\\([0-9]*\\).*/\\1/p' {info} 2>/dev/null)"
    missing = _("The instance's machine has not started yet.")
    script = (
        f'{find}; [ -n "$pid" ] || {{ echo {shlex.quote(missing)} >&2; exit 1; }}; '
        f'exec {quoted} "${{TERM:-xterm-256color}}" "$0" "$@"'
    )
    return ["/bin/sh", "-c", script, shlex.join(command), *command]


# Files root writes on the shared root, where the jobs' accounts write too: opened one folder at a time without
# following links, and the instance's folder made afresh at every start, never written through.


class _Folder:
    def __init__(self, fd: int, path: Path):
        self.fd, self.path = fd, path


def _fresh_folder(root: Path, name: str, group: int | None) -> _Folder:
    parent = os.open(root, OPEN_FOLDER)
    try:
        try:
            os.mkdir(BOOT, 0o755, dir_fd=parent)
        except FileExistsError:
            pass
        boot = os.open(BOOT, OPEN_FOLDER, dir_fd=parent)
    finally:
        os.close(parent)
    try:
        if os.fstat(boot).st_uid != os.geteuid():
            raise BackendError(f"{root / BOOT} is not the console's: its machines' boot files are not written there")
        os.fchmod(boot, 0o755)
        _remove(boot, name)
        os.mkdir(name, 0o700, dir_fd=boot)
        fd = os.open(name, OPEN_FOLDER, dir_fd=boot)
    finally:
        os.close(boot)
    _hand_over(fd, group, 0o750)
    return _Folder(fd, root / BOOT / name)


def _remove(dir_fd: int, name: str) -> None:
    try:
        info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(info.st_mode):
        shutil.rmtree(name, dir_fd=dir_fd)
    else:
        os.unlink(name, dir_fd=dir_fd)


def _write(dir_fd: int, name: str, data, group: int | None) -> None:
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(name, flags, 0o600, dir_fd=dir_fd)
    try:
        _hand_over(fd, group, 0o440)
        with os.fdopen(os.dup(fd), "wb") as file:
            file.write(data if isinstance(data, bytes) else data.encode())
    finally:
        os.close(fd)


def _hand_over(fd: int, group: int | None, mode: int) -> None:
    """The account's group may read it, nobody else but its owner (the console)."""
    if group is not None:
        try:
            os.fchown(fd, -1, group)
        except PermissionError:
            pass  # not root: the console's own group, which the shared account shares
    os.fchmod(fd, mode)
