"""The local backend: each instance is a bubblewrap sandbox on the console's own host.

A machine is a process tree the worker starts and leaves running (it survives a worker restart; reconcile finds
it again by the pid recorded when it started):

    instance agent (agent/gpucloud_agent.py, on the host, as the instance owner's sandbox user)
      └─ bwrap: its own user, PID, IPC, UTS, mount and network namespaces
           └─ /opt/gpucloud/boot/init: JupyterLab on a Unix socket, then the start command

An inference endpoint's machine (an instance of kind endpoint) runs no JupyterLab: its start command is its model
server, listening on ``/run/gpucloud/model.sock`` (for the tiny demo model, ``workloads/tiny_lm.py``); it is running
once that server answers ``GET /v1/models``, and the console's ``/v1`` proxy reaches it through the same socket.

Inside, the user is root of a user namespace that maps to one unprivileged host user per owner
(``LOCAL_SANDBOX_UID_BASE`` + the owner's id): files it writes on the host belong to that user, and everything
else on the host is as foreign to it as to any unprivileged user. It sees only what is bound in: ``/usr``
read-only, an ``/etc`` of its own (``local_etc``), the runtime (``instances.runtime``) read-only, its home (the
system disk, writable), a socket folder on a small tmpfs of its own, and the mount hub ``/mnt/gpucloud`` (data
disks, the owner's cloud storage, hub items read-only) that ``/root/data``, ``/root/shared``, ``/root/public`` and
``/root/datasets`` point into. Its network namespace has its own loopback and, where its zone allows egress
and the host has slirp4netns and nftables, an outbound-only interface (``local_network``): the internet, never the
host's loopback, its addresses or a private range. PostgreSQL, Redis and the console on the host's 127.0.0.1 are
out of reach either way.
Every process inside runs under a seccomp filter (``local_seccomp``); ``/tmp``, ``/var`` and ``/dev/shm`` are
tmpfs of fixed sizes and the rest of the machine's root read-only, so nothing it writes outside its disks is
unbounded; no process inside shows a host path in ``/proc`` (bwrap reads its options through a descriptor). Sandbox
uids come from a range the console claims on the host (``local_uids``).

The mount hub is a shared mount on the host, so a disk or a hub item mounted while the machine runs appears
inside at once (mount propagation), without a restart.

Limits, per instance, through a cgroup (v2 when the host delegates one, else v1): memory (``LOCAL_MEMORY_MB``),
processes (``LOCAL_PIDS``) and CPU (``LOCAL_CPUS``). Without a writable cgroup tree the limits are not enforced
and the log and the instance page say so. The home holds at most the spec's system disk: it is an ext4 image,
loop-mounted (``local_home``), or a plain folder without a limit where the host cannot loop-mount one.

Stop sends SIGUSR1 (the checkpoint signal) to the machine's processes through the agent, kills the sandbox after
the grace period and unmounts the home; start mounts the same home again; release deletes it. Data disks and
cloud storage live outside the instance's folder and survive.

It needs root (to switch to the sandbox users, mount and create cgroups) and ``bwrap``; :func:`availability`
says whether this host can run it, and ``make run`` falls back to the simulated backend when it cannot.
"""

import fcntl
import json
import logging
import math
import os
import re
import secrets
import shlex
import shutil
import signal
import socket
import stat
import subprocess
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from django.conf import settings
from django.utils import timezone
from django.utils.translation import gettext as _

from agent import gpucloud_agent as agent_module
from core.attaching import DATA_ROOT, disk_folder
from teams.accounts import is_account

from .. import attachments, runtime
from ..environment import boot_environment
from ..models import Instance
from . import (
    local_etc,
    local_home,
    local_image,
    local_lab,
    local_lxcfs,
    local_network,
    local_seccomp,
    local_uids,
    local_volumes,
)
from .base import (
    Backend,
    BackendError,
    BackendStatus,
    JupyterServer,
    MetricPoint,
    Phase,
    TransientBackendError,
)

log = logging.getLogger(__name__)

BWRAP = "/usr/bin/bwrap"
SFTP_SERVER = "/usr/lib/openssh/sftp-server"  # the host's, bound in with /usr: scp and sftp run it inside
MOUNT_HUB = "/mnt/gpucloud"  # inside the sandbox
TCP_LISTEN = "0A"  # a socket's state in /proc/net/tcp: listening
SOCKET_DIR = "/run/gpucloud"  # inside: JupyterLab's socket, and the hub's (served by the agent from outside)
HUB_SOCKET = "hub.sock"
HUB_RELAY_PORT = 8860  # inside, on the loopback: workloads/hub_relay.py, HF_ENDPOINT
BOOT_DIR = "/opt/gpucloud/boot"  # inside, read-only: the init script and the instance's environment
WORKLOADS_DIR = "/opt/gpucloud/workloads"  # inside, read-only: the quick-start script, the tiny model's server
JUPYTER_SOCKET = "jupyter.sock"  # in the machine's socket folder, where JupyterLab makes it
LAB_SOCKET = "lab.sock"  # a hard link to it in the root of the instance's run tmpfs: what the console connects to
MODEL_SOCKET = "model.sock"  # in the machine's socket folder, where an endpoint's model server makes it
LINKED_MODEL_SOCKET = "model-server.sock"  # the console's hard link to it, beside LAB_SOCKET
# The top-level folders of /root that lead into the mount hub.
HUB_LINKS = ("data", "shared", "shared-team", "public", "datasets")
DEFAULT_DISK_GB = 20  # a disk attached without its size (an older caller): the size the console offers first
# The instance's own copy of the agent, in a root-owned folder of the instance's folder: the sandbox user reads and
# runs it there, never in the console's checkout (which may be private).
TOOLS = "tools"
AGENT_FILE = "gpucloud_agent.py"
WORKLOADS_SOURCE = Path(__file__).resolve().parents[1] / "workloads"
MIN_GRACE = 1.0  # seconds
LOG_BYTES = 2 * 1024 * 1024  # the start command's log never holds more than its last 2 MB, running or not
# The instance's run folder is a small tmpfs of its own, mounted on the host while the machine runs: the sockets
# folder the machine writes (SOCKETS, bound at SOCKET_DIR), the console's link to JupyterLab's socket, the machine's
# generated /etc (ETC), its boot files (BOOT) and workloads (WORKLOADS), and bubblewrap's arguments (BWRAP_ARGS).
# Whatever the machine writes there stops at its size; everything else is written before the machine starts.
SOCKETS = "gpucloud"
ETC = "etc"
BOOT = "boot"  # in the run folder: the init script, the environment, the seccomp program
WORKLOADS = "workloads"  # in the run folder: a copy of the workloads for this start
BWRAP_ARGS = "bwrap.args"  # read by bwrap from a descriptor: its command line inside names no host path
SECCOMP_FILE = "seccomp.bpf"  # in the boot folder: bwrap loads it at start, and a shell entering the machine too
MIB = 1024 * 1024


# Where things are --------------------------------------------------------------------------------------------


def sandbox_root() -> Path:
    return Path(settings.LOCAL_SANDBOX_ROOT)


def folder(public_id) -> Path:
    """The instance's folder on the host: ``root/`` (its home, the system disk, where ``root.img`` is mounted),
    ``run/`` (a tmpfs while the machine runs, with its boot files), ``mnt/`` (the mount hub, a tmpfs while it runs),
    ``state.json`` and ``console.log``. Only the host's root writes anything but ``root/`` and ``run/gpucloud/``."""
    return sandbox_root() / "instances" / str(public_id)


def _storage_tree(account_public_id: str) -> Path:
    """Where the account's cloud storage is on this host: its tree in the storage location (``storage.tree``), the
    very files the console lists and serves; a folder of its own under the sandbox root where storage keeps no tree
    on this host (S3 without a mount)."""
    folder = attachments.shared_folder(account_public_id)
    return folder if folder is not None else sandbox_root() / "shared" / account_public_id


def hub_links(instance) -> tuple[str, ...]:
    """The mount hub's folders the machine links into /root: a person's cloud storage at ``shared``, a team's at
    ``shared-team`` (``instances.attachments.shared_target``)."""
    return tuple(name for name in HUB_LINKS if name != ("shared" if is_account(instance.owner) else "shared-team"))


def sandbox_uid(instance) -> int:
    return local_uids.uid_for(instance.owner_id)


def sockets(public_id) -> Path:
    """The machine's socket folder on the host (its /run/gpucloud), in the instance's run tmpfs."""
    return folder(public_id) / "run" / SOCKETS


# The host ----------------------------------------------------------------------------------------------------


def availability() -> tuple[bool, str]:
    """Whether this host can run sandboxes, and why not."""
    if os.geteuid() != 0:
        return False, "the local backend needs root (sandbox users, mounts and cgroups)"
    if not Path(BWRAP).exists():
        return False, "bubblewrap is not installed (apt-get install bubblewrap)"
    for tool in ("setpriv", "nsenter", "mount", "umount", "taskset"):
        if not shutil.which(tool):
            return False, f"{tool} is missing (util-linux)"
    probe = subprocess.run(
        [
            "setpriv",
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            BWRAP,
            "--unshare-user",
            "--unshare-pid",
            "--unshare-net",
            "--ro-bind",
            "/usr",
            "/usr",
            "--symlink",
            "usr/lib",
            "/lib",
            "--symlink",
            "usr/lib64",
            "/lib64",
            "--symlink",
            "usr/bin",
            "/bin",
            "/bin/true",
        ],
        capture_output=True,
        text=True,
        cwd="/",
        check=False,
    )
    if probe.returncode != 0:
        return False, f"bubblewrap cannot create namespaces here: {probe.stderr.strip()[:200]}"
    why = local_seccomp.unavailable()
    if why:
        return False, why
    return True, ""


def host_capacity() -> tuple[int, int]:
    """What this host's machines may hold together: its CPUs (those this process may run on, as ``nproc`` counts
    them) and memory (``MemTotal``), or LOCAL_HOST_CPUS / LOCAL_HOST_MEMORY_MB, less the console's own share
    (LOCAL_CONSOLE_CPUS, LOCAL_CONSOLE_MEMORY_MB). In thousandths of a vCPU and MB."""
    cpus = float(settings.LOCAL_HOST_CPUS) or len(os.sched_getaffinity(0))
    memory_mb = int(settings.LOCAL_HOST_MEMORY_MB) or _mem_total_mb()
    cpu_millis = int((cpus - float(settings.LOCAL_CONSOLE_CPUS)) * 1000)
    return max(cpu_millis, 0), max(memory_mb - int(settings.LOCAL_CONSOLE_MEMORY_MB), 0)


def machine_cpus(public_id) -> list[int]:
    """The host CPUs a machine runs on: as many as its CPU limit rounded up (LOCAL_CPUS), those the fewest running
    machines run on. Pinned to them, ``nproc`` and the thread pools that read the affinity (OpenMP, PyTorch) inside
    count the machine's CPUs, not the host's; the cgroup's quota still caps how much of them it uses."""
    host = sorted(os.sched_getaffinity(0))
    wanted = min(len(host), max(1, math.ceil(float(settings.LOCAL_CPUS))))
    load = dict.fromkeys(host, 0)
    for other in folder(public_id).parent.glob("*/state.json"):
        if other.parent.name == str(public_id):
            continue
        state = read_state(other.parent.name)
        if state.get("pid") and not state.get("killed") and _alive(state["pid"], state.get("started")):
            for cpu in state.get("cpus", ()):
                if cpu in load:
                    load[cpu] += 1
    return sorted(sorted(host, key=lambda cpu: (load[cpu], cpu))[:wanted])


def _mem_total_mb() -> int:
    with open("/proc/meminfo") as meminfo:
        for line in meminfo:
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) // 1024  # kB
    return 0


class Cgroup:
    """One instance's cgroup: v2 (``/sys/fs/cgroup/gpucloud/<id>``) or v1 (one folder per controller)."""

    ROOT = Path("/sys/fs/cgroup")

    def __init__(self, name: str):
        self.name = name
        if (self.ROOT / "cgroup.controllers").exists():
            self.paths = {"unified": self.ROOT / "gpucloud" / name}
        else:
            self.paths = {c: self.ROOT / c / "gpucloud" / name for c in ("memory", "pids", "cpu")}

    def create(self) -> bool:
        """Make the cgroup and write its limits; False when this host gives no writable cgroup tree."""
        memory = int(settings.LOCAL_MEMORY_MB) * 1024 * 1024
        pids, cpus = int(settings.LOCAL_PIDS), float(settings.LOCAL_CPUS)
        try:
            if "unified" in self.paths:
                parent = self.paths["unified"].parent
                parent.mkdir(exist_ok=True)
                (parent / "cgroup.subtree_control").write_text("+memory +pids +cpu")
                path = self.paths["unified"]
                path.mkdir(exist_ok=True)
                (path / "memory.max").write_text(str(memory))
                (path / "memory.swap.max").write_text("0")
                (path / "pids.max").write_text(str(pids))
                (path / "cpu.max").write_text(f"{int(cpus * 100000)} 100000")
            else:
                for path in self.paths.values():
                    path.mkdir(parents=True, exist_ok=True)
                (self.paths["memory"] / "memory.limit_in_bytes").write_text(str(memory))
                (self.paths["pids"] / "pids.max").write_text(str(pids))
                (self.paths["cpu"] / "cpu.cfs_period_us").write_text("100000")
                (self.paths["cpu"] / "cpu.cfs_quota_us").write_text(str(int(cpus * 100000)))
                accounting = self.ROOT / "cpuacct" / "gpucloud" / self.name  # CPU time, for the machine's chart
                if accounting.parent.parent.is_dir() and accounting.parent.parent != self.paths["cpu"].parent.parent:
                    try:
                        accounting.mkdir(parents=True, exist_ok=True)
                        self.paths["cpuacct"] = accounting
                    except OSError:
                        pass  # no chart of its CPU; the limits hold all the same
            for path in self.paths.values():
                # The agent, as the machine's user outside its namespaces, reads its usage for the chart: the
                # folders above it searchable only, its own readable (writing a limit still takes root).
                os.chmod(path.parent, 0o711)
                os.chmod(path, 0o755)
            return True
        except OSError as exc:
            log.warning("no cgroup limits for sandbox %s: %s", self.name, exc)
            return False

    def procs_files(self) -> list[Path]:
        return [path / "cgroup.procs" for path in self.paths.values() if path.exists()]

    def pids(self) -> set[int]:
        found: set[int] = set()
        for procs in self.procs_files():
            try:
                found |= {int(p) for p in procs.read_text().split()}
            except OSError:
                pass
        return found

    def remove(self) -> None:
        for path in self.paths.values():
            try:
                path.rmdir()
            except OSError:
                pass  # still has processes (they are being killed) or never existed


# Processes ---------------------------------------------------------------------------------------------------


def _start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (with the pid, it names one process for good)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def _alive(pid: int, started: str | None) -> bool:
    if not pid:
        return False
    now = _start_time(pid)
    if now is None or (started is not None and now != started):
        return False
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(entry.name))
    return sorted(found)


def _exe(pid: int) -> str:
    try:
        return os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return ""


# State -------------------------------------------------------------------------------------------------------


def read_state(public_id) -> dict:
    try:
        return json.loads((folder(public_id) / "state.json").read_text())
    except (OSError, ValueError):
        return {}


def write_state(public_id, state: dict) -> None:
    """Replace the state file whole (a unique temporary file, renamed: a reader never sees half of it)."""
    path = folder(public_id) / "state.json"
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".state-")
    with os.fdopen(fd, "w") as out:
        out.write(json.dumps(state, indent=1, sort_keys=True))
    os.replace(tmp, path)


def update_state(public_id, **changes) -> dict:
    """Change some keys of the state file, under a lock: the web process (mounts) and the worker (the machine's
    life) write it at the same time, and neither may undo the other's keys."""
    with open(folder(public_id) / "state.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        state = read_state(public_id)
        state.update(changes)
        write_state(public_id, state)
        return state


def _now() -> float:
    return time.time()


def _at(epoch: float | None) -> datetime | None:
    return datetime.fromtimestamp(epoch, UTC) if epoch else None


class LocalBackend(Backend):
    name = "local"
    simulated = False
    has_cards = False  # a machine reserves a card of its node's chip but runs on the host's CPU

    # Host capacity: every node of this backend is this host; a machine holds its cgroup limits.

    def demand(self, spec) -> tuple[int, int]:
        return math.ceil(float(settings.LOCAL_CPUS) * 1000), int(settings.LOCAL_MEMORY_MB)

    def host_capacity(self) -> tuple[int, int]:
        return host_capacity()

    # Lifecycle -----------------------------------------------------------------------------------------------

    def submit(self, instance) -> str:
        ok, why = availability()
        if not ok:
            raise BackendError(why)
        local_uids.claim()
        state = read_state(instance.public_id)
        if state.get("released"):
            raise BackendError(_("This instance's machine was released."))
        if self._running(state):
            return state["job_id"]  # already started: retries and reconcile land here
        try:
            runtime_path = runtime.ensure()
        except runtime.RuntimeUnavailable as exc:
            raise BackendError(str(exc)) from exc
        self._kill(instance.public_id, state)  # leftovers of a previous run
        image = local_image.ready_root(instance.image)
        base = folder(instance.public_id)
        uid = sandbox_uid(instance)
        local_image.make_traversable(base.parent)
        home, run, mnt = base / "root", base / "run", base / "mnt"
        boot = run / BOOT  # on the run folder's tmpfs, with the workloads: no host path names what the machine binds
        # base/.gpucloud: the agent's own files (it runs as the sandbox user, outside the sandbox).
        # Root creates and hands over only the folders directly in the instance's root-owned folder, which the
        # machine cannot replace; inside the home and the socket folder the machine's own processes (init, the
        # agent as the sandbox user) make what they need, so no symlink made inside can lead root anywhere.
        for path, owner, mode in (
            (base, 0, 0o711),
            (base / ".gpucloud", uid, 0o700),
            (home, uid, 0o700),
            (run, 0, 0o711),
            (mnt, 0, 0o755),
        ):
            _own_folder(path, owner, mode)
        disk_gb = local_home.prepare(base, uid, instance.spec.system_disk_gb)
        try:
            _own_folder(home, uid, 0o700)  # the mounted file system's root, when the home is an image
            _mount_run(run)  # a fresh one at every start: nothing the machine left there last time
            _own_folder(run / SOCKETS, uid, 0o700)
            # Root's, readable by the machine's group only: inside, the files belong to no user of the machine, so
            # even its root (all capabilities in its user namespace) cannot change the filter or the environment.
            boot.mkdir(mode=0o750)
            os.chown(boot, 0, uid)
            shutil.rmtree(base / "boot", ignore_errors=True)  # where older releases kept them, on the host's disk
            _copy_workloads(run / WORKLOADS)
            lab = local_lab.etc_files(f"{runtime_path}/bin", local_lab.lab_locale(instance.owner.language))
            egress = _egress(instance)
            nameservers = (local_network.DNS,) if egress else ()
            etc_files = {**lab, **_mirrors(egress)}
            local_etc.write_etc(run / ETC, hostname(instance), nameservers=nameservers, files=etc_files)
            _copy_tools(base / TOOLS)
            token = secrets.token_hex(24)
            self._write_boot(instance, boot, uid, token, egress=egress, image=image)
            # Disks and storage folders mounted on the host (and grown, if they grew while this machine held
            # them) before it binds them; a deleted disk's goes from the machine's mounts.
            mounts = state.get("mounts", {})
            gone = [
                t for t, e in mounts.items() if not e.get("read_only") and not local_volumes.ready(Path(e["source"]))
            ]
            if gone:
                state = update_state(instance.public_id, mounts={t: e for t, e in mounts.items() if t not in gone})
            self._mount_all(instance.public_id, state)
            for name in hub_links(instance):
                _open_folder(mnt / name)  # empty until something is mounted there
            cgroup = Cgroup(str(instance.public_id))
            limited = cgroup.create()
            logfile = base / "console.log"
            _trim(logfile)
            logfile.touch(mode=0o600)
            job_id = f"local-{instance.public_id.hex[:12]}-{int(_now())}"
            argv = self._argv(instance, base, uid, runtime_path, cgroup if limited else None, image=image)
            pidfile = base / "agent.pid"
            pidfile.unlink(missing_ok=True)
            # setsid --fork: the agent's parent is the host's init, not the worker, so a worker restart leaves the
            # machine running and nothing waits on it; the agent writes its own pid (as root, before it drops to the
            # sandbox user) into the instance's root-owned folder.
            cpus = machine_cpus(instance.public_id)
            argv = [
                "taskset",
                "--cpu-list",
                ",".join(map(str, cpus)),
                "setsid",
                "--fork",
                argv[0],
                argv[1],
                f"echo $$ > {shlex.quote(str(pidfile))}; {argv[2]}",
                *argv[3:],
            ]
            # Read and write, not append: the agent keeps the log within LOG_BYTES while it grows, rewriting it in
            # place (it reads its tail back through this descriptor).
            with open(logfile, "r+b") as out, open(base / "agent.log", "ab") as agent_log:
                out.seek(0, os.SEEK_END)
                out.write(f"\n== {timezone.localtime():%Y-%m-%d %H:%M:%S %z} · machine starting ==\n".encode())
                out.flush()
                subprocess.run(
                    argv,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=agent_log,
                    cwd="/",
                    check=True,
                    env={
                        "PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
                        "LANG": "C.UTF-8",
                        "GPUCLOUD_AGENT_TOKEN": agent_module_token(instance.public_id),
                    },
                )
        except BaseException:
            _umount(run)  # the machine never started: its home and run folder do not stay mounted
            local_home.unmount(base)
            raise
        pid = _wait_for_pid(pidfile)
        write_state(
            instance.public_id,
            {
                **{k: v for k, v in state.items() if k in ("mounts",)},
                "job_id": job_id,
                "pid": pid,
                "started": _start_time(pid),
                "submitted_at": _now(),
                "token": token,
                "uid": uid,
                "limited": limited,
                "cpus": cpus,
                "node": instance.node.name if instance.node_id else "",
                "disk_gb": disk_gb,
                "runtime": str(runtime_path),
                "image_root": image["rootfs"] if image else "",
                "image_path": local_image.search_path(image) if image else "",
                "image_lab": bool(image and image.get("jupyterlab")),
                "image_lab_ports": bool(image and image.get("lab_ports", True)),
                "image_ports": local_image.exposed_ports(image) if image else [],
            },
        )
        if egress:
            self._connect(instance.public_id, job_id)
        if not limited:
            log.warning("sandbox %s runs without memory, process and CPU limits (no writable cgroup)", job_id)
        return job_id

    def stop(self, instance, *, grace_seconds: float) -> None:
        state = read_state(instance.public_id)
        if not state.get("pid"):
            return
        if not self._running(state):
            self._kill(instance.public_id, state)
            return
        if state.get("signalled_at") is None:
            now = _now()
            state = update_state(instance.public_id, signalled_at=now, stop_at=now + grace_seconds)
            try:
                os.kill(state["pid"], signal.SIGUSR1)  # the agent writes the checkpoint marker and passes it on
            except ProcessLookupError:
                pass
            if grace_seconds < MIN_GRACE:
                self._wait_for_marker(instance.public_id, since=state["signalled_at"])
        if _now() >= state.get("stop_at", 0):
            self._kill(instance.public_id, state)

    def release(self, instance) -> None:
        state = read_state(instance.public_id)
        self._kill(instance.public_id, state)
        base = folder(instance.public_id)
        if base.exists():
            local_home.delete(base)
            shutil.rmtree(base / "run", ignore_errors=True)
            shutil.rmtree(base / "boot", ignore_errors=True)  # where machines started by older releases had it
            write_state(instance.public_id, {"released": _now()})

    def status(self, instance) -> BackendStatus:
        state = read_state(instance.public_id)
        if not state:
            return BackendStatus(Phase.ABSENT)
        if state.get("released"):
            return BackendStatus(Phase.RELEASED, since=_at(state["released"]))
        if not self._running(state):
            # Read before the clean-up below, which marks the machine killed: one that ended on its own (its start
            # command exited while booting, say) failed, and says why; one that was stopped or killed stopped.
            deliberate = state.get("signalled_at") is not None or state.get("killed")
            self._kill(instance.public_id, state)
            ended = state.get("ended_at") or _now()
            if deliberate:
                return BackendStatus(Phase.STOPPED, since=_at(ended))
            return BackendStatus(Phase.FAILED, since=_at(ended), message=self._last_words(instance.public_id))
        if state.get("disk_gb"):
            local_home.ensure_mounted(
                folder(instance.public_id), alive=lambda: self._running(read_state(instance.public_id))
            )
        if state.get("slirp_pid") and state.get("signalled_at") is None:
            state = self._keep_network(instance.public_id, state)
        if state.get("signalled_at") is not None:
            if _now() >= state.get("stop_at", 0):
                self._kill(instance.public_id, state)
                return BackendStatus(Phase.STOPPED, since=_at(state["stop_at"]))
            return BackendStatus(Phase.STOPPING, since=_at(state["signalled_at"]), ready_in=state["stop_at"] - _now())
        if not state.get("ready_at"):
            healthy = self._model_answers if _serves_a_model(instance) else self._jupyter_answers
            if state.get("image_root") and not _serves_a_model(instance):
                healthy = self._sandbox_up  # an image's machine runs no JupyterLab: up once its sandbox is
            if not healthy(instance.public_id, state):
                return BackendStatus(Phase.BOOTING, since=_at(state["submitted_at"]), ready_in=0.5)
            state = update_state(instance.public_id, ready_at=_now())
        return BackendStatus(Phase.RUNNING, since=_at(state["ready_at"]), access=self._access(instance, state))

    def metrics(self, instance, *, minutes: int = 30) -> list[MetricPoint]:
        from ..heartbeats import metric_points

        return metric_points(instance, minutes=minutes)

    # Disks and mounts: bind mounts under the instance's mount hub ------------------------------------------

    def attach_disk(self, instance, disk_id: str, size_gb: int | None = None, name: str = "") -> None:
        source = sandbox_root() / "disks" / str(disk_id)
        local_image.make_traversable(source.parent)
        local_volumes.ensure(source, sandbox_uid(instance), size_gb or DEFAULT_DISK_GB)
        target = self._disk_target(instance, str(source), name, str(disk_id))
        self._add_mount(instance, target, str(source), read_only=False)

    def delete_disk(self, disk_id: str) -> None:
        local_volumes.delete(sandbox_root() / "disks" / str(disk_id))

    def detach_disk(self, instance, disk_id: str) -> None:
        source = str(sandbox_root() / "disks" / str(disk_id))
        for target, entry in read_state(instance.public_id).get("mounts", {}).items():
            if entry["source"] == source:
                self.unmount(instance, target)

    def _disk_target(self, instance, source: str, name: str, disk_id: str) -> str:
        """Where a disk appears inside: ``/root/data/<folder>`` (:func:`disk_folder`: its name, or ``<name>-2``…
        when another disk of the machine has that folder already). A disk mounted elsewhere before (under its id, or
        another name) moves there."""
        mounts = read_state(instance.public_id).get("mounts", {})
        others = [target for target, entry in mounts.items() if entry["source"] != source]
        taken = {target.removeprefix(f"{DATA_ROOT}/") for target in others if target.startswith(f"{DATA_ROOT}/")}
        target = f"{DATA_ROOT}/{disk_folder(name, disk_id, taken)}"
        for before in [t for t, entry in mounts.items() if entry["source"] == source and t != target]:
            self.unmount(instance, before)
        return target

    def mount(self, instance, source: str, target: str) -> None:
        if source.startswith("cloudstorage/") or target == "/root/shared":
            account = source.rsplit("/", 1)[-1]
            try:
                path = attachments.mounted_shared(account)  # the bucket's prefix, on S3 storage
            except OSError as exc:
                raise TransientBackendError(_("The cloud storage could not be mounted; trying again.")) from exc
            if path is None:
                path = _storage_tree(account)  # bound by root: its parents stay private
                # The account's own files, limited to its storage quota (ENOSPC inside past it).
                local_volumes.ensure(path, sandbox_uid(instance), float(settings.STORAGE_MAX_GB), adopt=True)
                earlier = sandbox_root() / "shared" / path.name
                if earlier != path:  # what machines wrote before /root/shared was the account's cloud storage
                    local_volumes.merge_earlier(earlier, path)
            self._add_mount(instance, target, str(path), read_only=False)
            return
        # Only a hub item's folder under LOCAL_HUB_ROOT: never an absolute path or one that climbs out of it.
        if source.startswith("/") or ".." in Path(source).parts:
            raise BackendError(_("%(source)s cannot be mounted.") % {"source": source})
        path = Path(settings.LOCAL_HUB_ROOT) / source
        path.mkdir(parents=True, exist_ok=True)
        os.chmod(path, 0o755)  # the mount's root, listed inside; the folders above it stay the console's alone
        self._add_mount(instance, target, str(path), read_only=True)

    def unmount(self, instance, target: str) -> None:
        state = read_state(instance.public_id)
        mounts = state.get("mounts", {})
        if target in mounts:
            point = self._mount_point(instance.public_id, target)
            if point is not None:
                _umount(point)
                try:
                    point.rmdir()  # no empty folder left inside where the mount was
                except OSError:
                    pass
            del mounts[target]
            update_state(instance.public_id, mounts=mounts)

    def _mount_point(self, public_id, target: str) -> Path | None:
        relative = Path(target).relative_to("/root") if target.startswith("/root/") else None
        if relative is None or ".." in relative.parts or relative.parts[0] not in HUB_LINKS:
            return None
        return folder(public_id) / "mnt" / relative

    def _add_mount(self, instance, target: str, source: str, *, read_only: bool) -> None:
        if self._mount_point(instance.public_id, target) is None:
            raise BackendError(_("Nothing can be mounted at %(path)s.") % {"path": target})
        folder(instance.public_id).mkdir(parents=True, exist_ok=True)
        state = read_state(instance.public_id)
        if state.get("released"):
            raise BackendError(_("This instance's machine was released."))
        mounts = {**state.get("mounts", {}), target: {"source": source, "read_only": read_only}}
        state = update_state(instance.public_id, mounts=mounts)
        if self._running(state):
            self._mount_all(instance.public_id, state)  # propagates into the running sandbox

    def _mount_all(self, public_id, state: dict) -> None:
        """Make the host's mount hub match the recorded mounts (a shared mount: the sandbox sees changes)."""
        mnt = folder(public_id) / "mnt"
        mnt.mkdir(parents=True, exist_ok=True)
        if not _is_mount_point(mnt):
            # A small tmpfs of its own (a bind of the host folder would name its host path in the machine's
            # /proc/self/mountinfo), in a peer group of its own: mounts below it reach the sandbox (a slave of it) and
            # nothing else. It holds only the empty folders the mounts cover.
            options = "size=1m,nr_inodes=4096,mode=0755,uid=0,gid=0,nosuid,nodev,noexec"
            _run(["mount", "-t", "tmpfs", "-o", options, "gpucloud-mounts", str(mnt)])
            _run(["mount", "--make-private", str(mnt)])
            _run(["mount", "--make-shared", str(mnt)])
        for target, entry in state.get("mounts", {}).items():
            point = self._mount_point(public_id, target)
            if point is None or _is_mount_point(point):
                continue
            if not Path(entry["source"]).exists():
                log.warning("%s: %s is gone, not mounted at %s", public_id, entry["source"], target)
                continue
            _open_folder(point)
            options = ["-o", "ro"] if entry.get("read_only") else []
            _run(["mount", "--bind", *options, entry["source"], str(point)])

    def _unmount_all(self, public_id) -> None:
        """Undo every mount under the instance's mount hub, the hub's own bind included."""
        mnt = str(folder(public_id) / "mnt")
        for _attempt in range(20):
            points = [p for p in _mount_points() if p == mnt or p.startswith(mnt + "/")]
            if not points:
                return
            for point in sorted(set(points), key=len, reverse=True):
                _umount(Path(point))

    # Entering the machine ------------------------------------------------------------------------------------

    def jupyter(self, instance) -> JupyterServer | None:
        state = read_state(instance.public_id)
        if not self._running(state) or state.get("signalled_at") is not None:
            return None
        socket_path = _linked_socket(instance.public_id, state, JUPYTER_SOCKET, LAB_SOCKET)
        if socket_path is None:
            return None
        return JupyterServer(token=state["token"], base_path=lab_path(instance.public_id), socket=str(socket_path))

    def model_socket(self, instance) -> str:
        state = read_state(instance.public_id)
        if not _serves_a_model(instance) or not self._running(state) or state.get("signalled_at") is not None:
            return ""
        found = _linked_socket(instance.public_id, state, MODEL_SOCKET, LINKED_MODEL_SOCKET)
        return str(found) if found else ""

    def enter_argv(self, instance, command: str | None) -> list[str]:
        state = read_state(instance.public_id)
        pid = self._sandbox_pid(state) if self._running(state) else None
        if pid is None or state.get("signalled_at") is not None:
            raise BackendError(_("The instance is not running."))
        join = " ".join(f"echo $$ > {shlex.quote(str(p))};" for p in Cgroup(str(instance.public_id)).procs_files())
        # Inside: every capability dropped, a clean environment with the caller's TERM (the outer shell hands it
        # in as the inner one's $0) and the instance's variables; the outer shell joins the machine's cgroup. On a
        # terminal, the command runs under script(1) on a pty of the machine's own /dev/pts, which does not name the
        # caller's: tty, and any program that asks for its terminal's name, finds one.
        on_a_pty = 'if [ -t 0 ]; then exec /usr/bin/script -qefc "$1" /dev/null; fi; shift; exec "$@"'
        # The machine's seccomp filter is loaded (by the host's Python, isolated: nothing of the machine's runs
        # first) before the shell; nsenter itself runs with an empty environment, so no process inside ever shows
        # the caller's. PATH leads to the runtime the machine was started with (bound inside).
        if state.get("image_root"):
            return _enter_image_argv(instance, state, pid, join, command)
        path = _sandbox_path(_runtime_of(state))
        inner = [
            "/usr/bin/env",
            "-i",
            "/usr/bin/nsenter",
            "-t",
            str(pid),
            "-U",
            "-m",
            "-p",
            "-n",
            "-u",
            "-i",
            "--root",
            "--wd",
            "/usr/bin/setpriv",
            "--bounding-set=-all",
            "--inh-caps=-all",
            "--no-new-privs",
            "--",
            str(runtime.system_python()),
            "-I",
            "-S",
            "-c",
            local_seccomp.LOADER,
            f"{BOOT_DIR}/{SECCOMP_FILE}",
            "/usr/bin/env",
            "-i",
            "HOME=/root",
            "USER=root",
            "LOGNAME=root",
            "SHELL=/bin/bash",
            "LANG=C.UTF-8",
            f"PATH={path}",
            "/bin/sh",
            "-c",
            f'export TERM="$0"; cd /root; . {BOOT_DIR}/env; {on_a_pty}',
        ]
        if state.get("cpus"):  # on the machine's CPUs, as everything started inside it (nproc counts them)
            inner = ["/usr/bin/taskset", "--cpu-list", ",".join(map(str, state["cpus"])), *inner]
        command_argv = ["/bin/bash", "-l"] if command is None else ["/bin/bash", "-c", command]
        whole = shlex.quote(shlex.join(command_argv))
        script = f'{join} exec {shlex.join(inner)} "${{TERM:-xterm-256color}}" {whole} "$@"'
        return ["/bin/sh", "-c", script, "sh", *command_argv]

    def logs(self, instance, *, tail: int = 200) -> str:
        return tail_lines(folder(instance.public_id) / "console.log", tail)

    def system_disk_usage(self, instance) -> int:
        base = folder(instance.public_id)
        if not (base / "root").exists():
            raise BackendError("the system disk was released with the instance")
        total = 0
        with local_home.opened(base) as home:
            for dirpath, _dirs, files in os.walk(home):
                for name in files:
                    try:
                        total += os.lstat(os.path.join(dirpath, name)).st_size
                    except OSError:
                        pass
        return total

    def snapshot_system_disk(self, instance) -> int:
        """The home is the image: saving one keeps a copy under ``images/<instance>``."""
        target = sandbox_root() / "images" / str(instance.public_id)
        if not target.exists():
            with local_home.opened(folder(instance.public_id)) as home:
                shutil.copytree(home, target, symlinks=True)
        return self.system_disk_usage(instance)

    # Internals -------------------------------------------------------------------------------------------------

    def _running(self, state: dict) -> bool:
        return bool(state.get("pid")) and not state.get("killed") and _alive(state["pid"], state.get("started"))

    def listening_ports(self, instance) -> list[int] | None:
        """Read from the kernel's table of the machine's network namespace (``/proc/<pid>/net/tcp{,6}`` of a
        process inside), never from anything the machine wrote."""
        state = read_state(instance.public_id)
        if not self._running(state):
            return []
        inside = self._sandbox_pid(state)
        if inside is None:
            return []
        ports = set()
        for table in ("tcp", "tcp6"):
            try:
                rows = Path(f"/proc/{inside}/net/{table}").read_text().splitlines()[1:]
            except OSError:
                continue
            for row in rows:
                fields = row.split()
                if len(fields) > 3 and fields[3] == TCP_LISTEN:
                    ports.add(int(fields[1].rsplit(":", 1)[1], 16))
        return sorted(ports - {HUB_RELAY_PORT})  # the platform's own relay to the model hub is no app of theirs

    def _connect(self, public_id, job_id: str) -> None:
        """The machine's outbound interface (``local_network``), its rules first; loopback only if that fails."""
        inside = None
        deadline = time.monotonic() + 10
        while inside is None and time.monotonic() < deadline:
            state = read_state(public_id)
            inside = self._sandbox_pid(state)
            if inside is None and not self._running(state):
                break  # the machine ended before its sandbox appeared (bwrap refused it): nothing to wait for
            if inside is None:
                time.sleep(0.05)
        try:
            if inside is None:
                raise local_network.NetworkError("the sandbox's first process did not appear")
            slirp = local_network.attach(inside, folder(public_id) / "network.log")
        except local_network.NetworkError as exc:
            log.warning("sandbox %s has its loopback only: %s", job_id, exc)
            return
        update_state(public_id, slirp_pid=slirp, slirp_started=_start_time(slirp), netns_pid=inside)

    def _keep_network(self, public_id, state: dict) -> dict:
        """A running machine whose slirp4netns went away (killed, crashed) gets a new one, its rules loaded first,
        at the next look (the reconcile beat): its outbound network comes back without a restart."""
        if _alive(state["slirp_pid"], state.get("slirp_started")):
            return state
        inside = self._sandbox_pid(state)
        logfile = folder(public_id) / "network.log"
        try:
            if inside is None:
                raise local_network.NetworkError("the sandbox's first process is gone")
            slirp = local_network.attach(inside, logfile)
        except local_network.NetworkError as exc:
            log.warning("machine %s lost its outbound network and it could not be brought back: %s", public_id, exc)
            return update_state(public_id, slirp_pid=None, slirp_started=None)
        log.warning("machine %s lost its outbound network (slirp4netns exited): brought back", public_id)
        return update_state(public_id, slirp_pid=slirp, slirp_started=_start_time(slirp), netns_pid=inside)

    def _sandbox_pid(self, state: dict) -> int | None:
        """A process inside the sandbox: the agent's child is bwrap, whose child is the namespace's first."""
        for outer in _children(state["pid"]):
            if Path(_exe(outer)).name != "bwrap":
                continue
            inner = _children(outer)
            if inner:
                return inner[0]
        return None

    def _kill(self, public_id, state: dict) -> None:
        """Every process of the machine gone, its mounts undone, its cgroup removed. Idempotent."""
        pid = state.get("pid")
        if pid and _alive(pid, state.get("started")):
            for child in _children(pid):
                _signal(child, signal.SIGKILL)  # bwrap: the namespace's processes die with it
            _signal(pid, signal.SIGKILL)
        cgroup = Cgroup(str(public_id))
        for _attempt in range(50):
            left = cgroup.pids()
            if not left:
                break
            for each in left:
                _signal(each, signal.SIGKILL)
            time.sleep(0.05)
        if pid:
            for _attempt in range(50):  # the agent is the worker's grandchild at most: reaped by init or by Popen
                if not _alive(pid, state.get("started")):
                    break
                time.sleep(0.05)
        cgroup.remove()
        if state.get("slirp_pid") and _alive(state["slirp_pid"], state.get("slirp_started")):
            local_network.stop(state["slirp_pid"])
        if folder(public_id).exists():
            self._unmount_all(public_id)
            local_home.unmount(folder(public_id))
            if _is_mount_point(folder(public_id) / "run"):
                _umount(folder(public_id) / "run")
        if pid and not state.get("killed"):
            state.update(killed=True, ended_at=state.get("ended_at") or _now())
            if folder(public_id).exists():
                update_state(public_id, killed=True, ended_at=state["ended_at"])

    def _wait_for_marker(self, public_id, *, since: float) -> None:
        """Give the agent a moment to write the checkpoint marker before a stop with no grace period kills it."""
        marker = folder(public_id) / "root" / agent_module.MARKER
        deadline = time.monotonic() + MIN_GRACE
        while time.monotonic() < deadline:
            try:
                if marker.lstat().st_mtime >= since - 0.01:  # the machine's file: never followed
                    return
            except OSError:
                pass
            time.sleep(0.02)

    def _sandbox_up(self, public_id, state: dict) -> bool:
        return self._sandbox_pid(state) is not None

    def _jupyter_answers(self, public_id, state: dict) -> bool:
        request = (
            f"GET {lab_path(public_id)}api/status HTTP/1.0\r\nHost: localhost\r\n"
            f"Authorization: token {state['token']}\r\n\r\n"
        ).encode()
        return _answers_200(_linked_socket(public_id, state, JUPYTER_SOCKET, LAB_SOCKET), request)

    def _model_answers(self, public_id, state: dict) -> bool:
        """The health check of an endpoint's machine: its model server lists its model."""
        request = b"GET /v1/models HTTP/1.0\r\nHost: localhost\r\n\r\n"
        return _answers_200(_linked_socket(public_id, state, MODEL_SOCKET, LINKED_MODEL_SOCKET), request)

    def _access(self, instance, state: dict) -> dict:
        # disk_gb: the size the home is limited to (0: none on this host); limited: whether the cgroup limits are.
        serves = _serves_a_model(instance)
        return {
            "simulated": False,
            "node": state.get("node", ""),
            "job_id": state.get("job_id", ""),
            "sandbox": True,
            # An image's machine runs JupyterLab only when the image has one (its own, started by its own Python).
            "jupyter": not serves and (not state.get("image_root") or state.get("image_lab", False)),
            # An image's own JupyterLab without jupyter-server-proxy opens no port (the runtime's has it).
            "lab_without_ports": bool(state.get("image_root")) and not state.get("image_lab_ports", True),
            "image": bool(state.get("image_root")),
            "image_ports": state.get("image_ports", []),
            "model_server": serves,
            "ssh": True,
            "disk_gb": state.get("disk_gb", 0),
            "limited": state.get("limited", False),
            "egress": bool(state.get("slirp_pid")),
        }

    def _last_words(self, public_id) -> str:
        last = tail_lines(folder(public_id) / "console.log", 1).strip()
        return f"the machine exited: {last[:200]}" if last else "the machine exited"

    def _write_boot(
        self, instance, boot: Path, uid: int, token: str, *, egress: bool = False, image: dict | None = None
    ) -> None:
        # The model hub through the agent's relay, or the operator's mirror when the machine has a network to reach
        # it; the user's own variables win.
        endpoint = settings.MIRROR_HF_ENDPOINT if egress and settings.MIRROR_HF_ENDPOINT else ""
        hub = {"HF_ENDPOINT": endpoint or f"http://127.0.0.1:{HUB_RELAY_PORT}", "HF_HUB_DISABLE_TELEMETRY": "1"}
        # The platform's variables are in this file, not in bwrap's environment: JupyterLab, the start command and
        # every SSH session read it, so a run started over SSH logs its curve where the agent reads it too.
        platform = {
            "GPUCLOUD_INSTANCE": str(instance.public_id),
            "GPUCLOUD_SCALARS": f"/root/{agent_module.SCALARS_FILE}",
            "GPUCLOUD_CHECKPOINT_MARKER": f"/root/{agent_module.MARKER}",
            "QUICKSTART_CHECKPOINT": "/root/.gpucloud/quickstart.json",
            "GPUCLOUD_NETWORK": "outbound" if egress else "loopback",
        }
        own = local_image.environment(image) if image else {}  # the image's env, under everything else
        environment = {**own, **platform, "JUPYTER_TOKEN": token, **hub, **boot_environment(instance)}
        env_lines = [f"export {name}={shlex.quote(value)}" for name, value in environment.items()]
        files = {
            "env": "\n".join(env_lines) + "\n",
            "init": _image_init(instance, image) if image else init_script(instance),
            "start": (instance.start_command or default_start(instance, image)) + "\n",
        }
        files[SECCOMP_FILE] = local_seccomp.program()
        for name, text in files.items():
            path = boot / name
            path.unlink(missing_ok=True)
            path.write_bytes(text if isinstance(text, bytes) else text.encode())
            os.chown(path, 0, uid)
            os.chmod(path, 0o440)
        os.chmod(boot, 0o550)

    def _argv(
        self, instance, base: Path, uid: int, runtime_path: Path, cgroup: Cgroup | None, *, image: dict | None = None
    ) -> list[str]:
        prefix = runtime.python_prefix()
        run = base / "run"
        # Every writable place inside has a size: the home and disks their images, the sockets folder its tmpfs,
        # /tmp, /var and /dev/shm theirs (in memory, counted in the machine's memory limit too); /dev and the root
        # bwrap builds the sandbox in are read-only.
        environment = {
            "HOME": "/root",
            "USER": "root",
            "SHELL": "/bin/sh" if image else "/bin/bash",
            "LANG": "C.UTF-8",
            "PATH": local_image.search_path(image) if image else _sandbox_path(runtime_path),
        }
        # The machine's root: the host's /usr with a generated /etc and the runtime, or an imported image's root.
        if image:
            root = [tuple(local_image.root_binds(image["rootfs"], run / ETC, int(settings.LOCAL_RUN_MB)))]
        else:
            root = [
                ("--ro-bind", "/usr", "/usr", "--ro-bind", str(run / ETC), "/etc", *local_etc.bwrap_binds()),
                ("--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64"),
                ("--symlink", "usr/bin", "/bin", "--symlink", "usr/sbin", "/sbin"),
            ]
        # The runtime is bound after /tmp (it may live there); a machine booted from an image does not run it.
        runtime_binds = [] if image else [("--ro-bind", str(runtime_path), str(runtime_path))]
        if prefix and not image:
            runtime_binds.append(("--ro-bind", str(prefix), str(prefix)))
        groups = [
            ("--unshare-user", "--uid", "0", "--gid", "0", "--unshare-pid", "--unshare-ipc", "--unshare-uts"),
            ("--unshare-net", "--die-with-parent", "--disable-userns", "--hostname", hostname(instance)),
            local_network.BWRAP_CAP_DROPS,  # the machine's root cannot change its network rules or interface
            *root,
            ("--dev", "/dev", "--size", str(int(settings.LOCAL_SHM_MB) * MIB), "--tmpfs", "/dev/shm"),
            ("--remount-ro", "/dev", "--proc", "/proc", *local_lxcfs.bwrap_binds(local_lxcfs.ensure())),
            ("--size", str(int(settings.LOCAL_TMP_MB) * MIB), "--tmpfs", "/tmp"),
            ("--size", str(int(settings.LOCAL_VAR_MB) * MIB), "--tmpfs", "/var", "--dir", "/var/tmp"),
            *runtime_binds,
            ("--size", str(int(settings.LOCAL_RUN_MB) * MIB), "--tmpfs", "/run") if image else (),
            ("--bind", str(base / "root"), "/root", "--bind", str(run / SOCKETS), SOCKET_DIR),
            ("--ro-bind", str(run / BOOT), BOOT_DIR, "--ro-bind", str(run / WORKLOADS), WORKLOADS_DIR),
            ("--bind", str(base / "mnt"), MOUNT_HUB, "--clearenv"),
            *(("--setenv", name, value) for name, value in environment.items()),
            ("--chdir", "/root", "--seccomp", "4", "--remount-ro", "/"),
        ]
        bwrap = [argument for group in groups for argument in group]
        # bwrap reads its options from a file (descriptor 3) and its seccomp program from another (4), and runs with
        # an empty environment: its command line and environment, which its first process inside shows in
        # /proc/1, name no host path. The workload ignores SIGUSR1 on the way in, so the checkpoint signal the agent
        # passes to its process group does not end bwrap or JupyterLab; the start command gets the default action
        # back (init).
        options = run / BWRAP_ARGS
        options.unlink(missing_ok=True)
        options.write_bytes(b"".join(arg.encode() + b"\0" for arg in bwrap))
        os.chown(options, uid, uid)
        os.chmod(options, 0o400)
        workload = [
            "/bin/sh",
            "-c",
            f"trap '' USR1; exec /usr/bin/env -i {BWRAP} --args 3 -- /bin/sh {BOOT_DIR}/init "
            f"3<{shlex.quote(str(options))} 4<{shlex.quote(str(run / BOOT / SECCOMP_FILE))}",
        ]
        agent = [
            str(runtime.system_python()),
            str(base / TOOLS / AGENT_FILE),
            "--instance",
            str(instance.public_id),
            "--root",
            str(sandbox_root()),
            "--family",
            "cpu",
            "--console",
            settings.LOCAL_AGENT_CONSOLE_URL,
            "--interval",
            str(settings.LOCAL_HEARTBEAT_SECONDS),
            "--hub-socket",
            str(run / SOCKETS / HUB_SOCKET),
            "--log-cap",
            str(LOG_BYTES),
            "--",
            *workload,
        ]
        switch = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--inh-caps=-all", "--"]
        join = " ".join(f"echo $$ > {shlex.quote(str(p))};" for p in (cgroup.procs_files() if cgroup else []))
        return ["/bin/sh", "-c", f'{join} exec "$@"', "sh", *switch, *agent]


DEFAULT_START = (
    "# No start command was given: the quick-start training script runs on the CPU and charts its curve.\n"
    f"exec python {WORKLOADS_DIR}/quickstart_train.py"
)
# An endpoint's machine serves the tiny demo model, the one model a machine without a card can serve (the console
# refuses to deploy a template that needs a card here). It serves the model under the model's own name.
ENDPOINT_START = (
    "# The endpoint's model server: the tiny demo model trained into the runtime at install, on a Unix socket.\n"
    f"exec python {WORKLOADS_DIR}/tiny_lm.py --socket {SOCKET_DIR}/{MODEL_SOCKET}"
)


def _egress(instance) -> bool:
    """Whether the machine gets an outbound interface: its zone allows it and the host can give one."""
    if not instance.zone.egress:
        return False
    ok, why = local_network.availability()
    if not ok:
        log.warning("instance %s: %s", instance.public_id, why)
    return ok


def _mirrors(egress: bool) -> dict[str, str]:
    """The operator's package mirror, for a machine with a network to reach it."""
    if egress and settings.MIRROR_PIP_INDEX:
        return {"pip.conf": f"[global]\nindex-url = {settings.MIRROR_PIP_INDEX}\n"}
    return {}


def _serves_a_model(instance) -> bool:
    return instance.kind == Instance.Kind.ENDPOINT


def default_start(instance, image: dict | None = None) -> str:
    if _serves_a_model(instance):
        return ENDPOINT_START
    if image:
        return local_image.default_start(image)
    return DEFAULT_START


# The sandbox's first process. JupyterLab runs in its own session (the checkpoint signal is for the workload),
# the start command with SIGUSR1's default action restored and its output in the instance's log. A machine ends when
# its start command and JupyterLab have both ended; an endpoint's (no JupyterLab) when its model server does, so a
# server that cannot start fails the endpoint at once, with its last words. At the first start the quick-start
# notebook is copied into the home, inside and as the machine's user (never over a file of theirs).
INIT_SCRIPT = """\
. /opt/gpucloud/boot/env
mkdir -p /root/.gpucloud
for name in data shared shared-team public datasets; do
  [ -d "/mnt/gpucloud/$name" ] || continue
  [ -e "/root/$name" ] || [ -L "/root/$name" ] || ln -s "/mnt/gpucloud/$name" "/root/$name"
done
setsid python /opt/gpucloud/workloads/hub_relay.py >/run/gpucloud/hub-relay.log 2>&1 &
if [ ! -e /root/.gpucloud/quickstart-given ]; then
  [ -e /root/quickstart.ipynb ] || [ -L /root/quickstart.ipynb ] ||
    cp /opt/gpucloud/workloads/quickstart.ipynb /root/ 2>/dev/null
  touch /root/.gpucloud/quickstart-given 2>/dev/null
fi
{lab}i=0  # the start command meets the outbound interface up (the host attaches it within a second of the start)
while [ "$GPUCLOUD_NETWORK" = outbound ] && [ $i -lt 100 ] && ! grep -q '^ *tap0:' /proc/net/dev; do
  sleep 0.1; i=$((i + 1))
done
python -c 'import os, signal as s, sys; s.signal(s.SIGUSR1, s.SIG_DFL); os.execv(sys.argv[1], sys.argv[1:])' \\
  /bin/sh /opt/gpucloud/boot/start 2>&1
echo "== start command exited with status $? =="
{end}
"""
LAB_LINES = """\
setsid jupyter lab --no-browser --allow-root --ServerApp.sock={socket} --ServerApp.sock_mode=0600 \\
  --ServerApp.base_url={base_url} --ServerApp.root_dir=/root --LabApp.news_url=None \\
  --LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate \\
  >/run/gpucloud/jupyter.log 2>&1 &
"""


def init_script(instance) -> str:
    if _serves_a_model(instance):
        return INIT_SCRIPT.format(lab="", end="exit 1")
    lab = LAB_LINES.format(base_url=lab_path(instance.public_id), socket=f"{SOCKET_DIR}/{JUPYTER_SOCKET}")
    return INIT_SCRIPT.format(lab=lab, end="wait")


def _image_init(instance, image: dict) -> str:
    lab = ""
    if image.get("jupyterlab"):
        lab = local_image.lab_lines(image["jupyterlab"], lab_path(instance.public_id), f"{SOCKET_DIR}/{JUPYTER_SOCKET}")
    return local_image.init_script(str(runtime.system_python()), lab=lab)


def hostname(instance) -> str:
    return f"gpu-{instance.public_id.hex[:8]}"


def lab_path(public_id) -> str:
    return f"/instances/{public_id}/lab/"


def _sandbox_path(runtime_path: Path | None = None) -> str:
    runtime_path = runtime_path or runtime.path()
    return f"{runtime_path}/bin:/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"


def _enter_image_argv(instance, state: dict, pid: int, join: str, command: str | None) -> list[str]:
    """``enter_argv`` for a machine booted from an image: the same steps, with the host's programs run through the
    host's loader (the image may have no C library, or another one) and only the image's ``/bin/sh`` of its own.
    The clean environment is made on the host, before nsenter, since the image may have no ``env``."""
    host = local_image.host_program
    on_a_pty = 'if [ -t 0 ]; then exec {script} -qefc "$1" /dev/null; fi; shift; exec "$@"'.format(
        script=shlex.join(host("/usr/bin/script"))
    )
    variables = ["HOME=/root", "USER=root", "LOGNAME=root", "SHELL=/bin/sh", "LANG=C.UTF-8"]
    inner = [
        "/usr/bin/env",
        "-i",
        *variables,
        f"PATH={state['image_path']}",
        *("/usr/bin/nsenter", "-t", str(pid), "-U", "-m", "-p", "-n", "-u", "-i", "--root", "--wd"),
        *host("/usr/bin/setpriv"),
        *("--bounding-set=-all", "--inh-caps=-all", "--no-new-privs", "--"),
        *host(str(runtime.system_python())),
        *("-I", "-S", "-c", local_seccomp.LOADER, f"{BOOT_DIR}/{SECCOMP_FILE}"),
        *("/bin/sh", "-c", f'export TERM="$0"; cd /root; . {BOOT_DIR}/env; {on_a_pty}'),
    ]
    if state.get("cpus"):
        inner = ["/usr/bin/taskset", "--cpu-list", ",".join(map(str, state["cpus"])), *inner]
    command_argv = ["/bin/sh", "-l"] if command is None else ["/bin/sh", "-c", command]
    whole = shlex.quote(shlex.join(command_argv))
    script = f'{join} exec {shlex.join(inner)} "${{TERM:-xterm-256color}}" {whole} "$@"'
    return ["/bin/sh", "-c", script, "sh", *command_argv]


def _runtime_of(state: dict) -> Path | None:
    """The runtime the machine was started with (bound inside), which an upgrade since does not move."""
    return Path(state["runtime"]) if state.get("runtime") else None


def agent_module_token(public_id) -> str:
    from .slurm import agent_token

    return agent_token(public_id)


TAIL_BYTES = 1024 * 1024  # a log's tail is read from at most its last megabyte


def tail_lines(path: Path, lines: int) -> str:
    """The last ``lines`` lines of a file, read from its end and from at most its last ``TAIL_BYTES`` (a long
    log, or one endless line, costs no more than a short one)."""
    try:
        with path.open("rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            blocks, newlines, read = [], 0, 0
            while size > 0 and newlines <= lines and read < TAIL_BYTES:
                step = min(65536, size, TAIL_BYTES - read)
                size -= step
                f.seek(size)
                block = f.read(step)
                blocks.append(block)
                newlines += block.count(b"\n")
                read += step
            data = b"".join(reversed(blocks))
    except OSError:
        return ""
    return "\n".join(data.decode("utf-8", "replace").splitlines()[-lines:])


def _trim(path: Path) -> None:
    try:
        if path.stat().st_size > LOG_BYTES:
            with path.open("rb") as f:
                f.seek(-LOG_BYTES // 2, os.SEEK_END)
                keep = f.read()
            path.write_bytes(keep)
    except OSError:
        pass


def _mount_run(run: Path) -> None:
    """A fresh tmpfs of ``LOCAL_RUN_MB`` at the instance's run folder (root's, searchable by all)."""
    if _is_mount_point(run):
        _umount(run)
    size = int(settings.LOCAL_RUN_MB) * MIB
    options = f"size={size},nr_inodes=4096,mode=0711,uid=0,gid=0,nosuid,nodev,noexec"
    _run(["mount", "-t", "tmpfs", "-o", options, "gpucloud-run", str(run)])


def _own_folder(path: Path, owner: int, mode: int) -> None:
    """``path`` a real folder (not a symlink) owned by ``owner`` with ``mode``; its parent is root's."""
    path.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        os.fchown(fd, owner, owner)
        os.fchmod(fd, mode)
    finally:
        os.close(fd)


def _linked_socket(public_id, state: dict, made_name: str, link_name: str) -> Path | None:
    """The socket the console may connect to: a hard link ``link_name``, in the instance's root-owned folder, to the
    socket ``made_name`` that a server (JupyterLab, an endpoint's model server) made in the machine's socket folder.
    It is (re)made only from a socket of the machine's user and checked after it is made, so a symlink or another
    file put there from inside never leads the console (root) to one of the host's sockets; once made, nothing the
    machine does changes where it leads."""
    base = folder(public_id)
    link, made = base / "run" / link_name, sockets(public_id) / made_name
    uid = state.get("uid")

    def ours(path: Path):
        try:
            found = os.lstat(path)
        except OSError:
            return None
        return found if stat.S_ISSOCK(found.st_mode) and found.st_uid == uid else None

    current, fresh = ours(link), ours(made)
    if current is not None and (fresh is None or fresh.st_ino == current.st_ino):
        return link

    if fresh is None:
        return None
    link.unlink(missing_ok=True)  # the server made a new socket (it restarted), or the link is not a socket
    try:
        os.link(made, link, follow_symlinks=False)
    except OSError:
        return None
    if ours(link) is None:  # swapped between the check and the link: never use it
        link.unlink(missing_ok=True)
        return None
    return link


def _answers_200(path: Path | None, request: bytes) -> bool:
    """Whether the server on the socket ``path`` answers ``request`` with 200 within two seconds."""
    if path is None:
        return False
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
            client.settimeout(2)
            client.connect(str(path))
            client.sendall(request)
            head = client.recv(64)
    except OSError:
        return False
    return head.startswith(b"HTTP/1.1 200") or head.startswith(b"HTTP/1.0 200")


def _copy_tools(tools: Path) -> None:
    """A fresh copy of the agent in ``tools`` (root's, readable by all): a machine started after an upgrade runs the
    new agent, and nothing the sandbox user could write is run."""
    staging = Path(tempfile.mkdtemp(prefix=".tools-", dir=tools.parent))
    try:
        os.chmod(staging, 0o755)
        shutil.copyfile(agent_module.__file__, staging / AGENT_FILE)
        os.chmod(staging / AGENT_FILE, 0o644)
        if tools.is_dir() and not tools.is_symlink():
            shutil.rmtree(tools)
        os.replace(staging, tools)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _copy_workloads(target: Path) -> None:
    """The workloads (the quick-start, the tiny model's server, the hub relay) copied into ``target`` on the
    machine's fresh run tmpfs: root's, readable by all, bound read-only inside."""
    target.mkdir(mode=0o755)
    for source in [*WORKLOADS_SOURCE.glob("*.py"), *WORKLOADS_SOURCE.glob("*.ipynb")]:
        shutil.copyfile(source, target / source.name)
        os.chmod(target / source.name, 0o644)
    os.chmod(target, 0o755)


def _open_folder(path: Path) -> None:
    """``path`` and the folders up to the instance's mount hub made readable by all: the machine lists them inside
    (the console's umask would leave new folders its own alone)."""
    missing = []
    while not path.exists():
        missing.append(path)
        path = path.parent
    for folder in reversed(missing):
        folder.mkdir(exist_ok=True)
        os.chmod(folder, 0o755)


def _wait_for_pid(pidfile: Path, timeout: float = 10.0) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            return int(pidfile.read_text().strip())
        except (OSError, ValueError):
            time.sleep(0.02)
    raise TransientBackendError("the machine's agent did not start")


def _signal(pid: int, signum) -> None:
    try:
        os.kill(pid, signum)
    except (ProcessLookupError, PermissionError):
        pass


def _mount_points() -> list[str]:
    """Every mount point of this mount namespace, as /proc/self/mountinfo lists them (octal escapes undone)."""
    with open("/proc/self/mountinfo") as info:
        return [re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), line.split()[4]) for line in info]


def _is_mount_point(path: Path) -> bool:
    # Not os.path.ismount: a bind mount from the same file system has the same device as its parent.
    return str(path) in _mount_points()


def _run(argv: list[str]) -> None:
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        log.warning("%s failed: %s", " ".join(argv), done.stderr.strip()[:500])  # host paths stay in the log
        raise TransientBackendError(_("The machine's mounts could not be changed; trying again."))


def _umount(path: Path) -> None:
    subprocess.run(["umount", "-l", str(path)], capture_output=True, check=False)
