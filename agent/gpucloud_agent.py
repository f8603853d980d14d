"""The instance agent: the program a Slurm job runs for an instance (``python3 agent/gpucloud_agent.py …``).

It is standard-library only, so any Python 3.11 on a node runs it without the console's virtualenv. It

* maps the cards Slurm allocated (``SLURM_JOB_GPUS``: global GRES indexes) to the vendor's visibility variable
  (``ASCEND_RT_VISIBLE_DEVICES``, ``MLU_VISIBLE_DEVICES``, ``HIP_VISIBLE_DEVICES``, ``CUDA_VISIBLE_DEVICES``),
  counting from the first card of the chip's type on the node (``--offset``);
* lays out the instance's directories under the instance root: the system disk (the instance's ``/``), data disks
  under ``/root/data/<folder>`` (the disk's name: the console writes each disk's folder in the layout), the user's
  cloud storage at ``/root/shared`` and read-only hub items at ``/root/public/<repo>``, as symlinks (a mount is
  metadata, never a copy);
* starts the user's workload and, on SIGUSR1 (the console's checkpoint signal) or SIGTERM (stop, preemption),
  writes a checkpoint marker and passes the signal on; after SIGTERM it gives the workload ``--grace`` seconds;
* reports a heartbeat with metrics to the console every ``--interval`` seconds, authenticated by the instance's
  own token (``GPUCLOUD_AGENT_TOKEN`` in the environment, never on the command line). Metrics come from the
  vendor's tool when it is installed (npu-smi, cnmon, hy-smi, nvidia-smi); otherwise from the host's CPU and
  memory, labelled ``host``;
* with ``--jupyter <python>``, runs JupyterLab beside the workload: on the node's own address and a free port, with
  the console's lab path as its base URL, the instance's home as its root and ``JUPYTER_TOKEN`` (from the job's
  environment) as its password. It has a session of its own and ignores SIGUSR1, so the checkpoint signal is the
  workload's alone, and it ends with the agent. The first report waits until it answers (``--jupyter-wait`` at
  most), so the instance is running with its lab; every report then carries its address, which the console checks
  before its proxy goes there (``backends.slurm.lab_address_allowed``);
* writes the workload's environment to the system disk (``.gpucloud/environment``, readable by the jobs' user
  only), so a shell the console opens in the job (``srun --overlap``) gets the same variables and secrets;
* with ``--hub-socket <path>``, serves the model hub to the machine through that Unix socket (bound into a sandbox
  with no network): each request, one per connection, goes to the console only when it is one of the hub's Hugging
  Face API addresses (repository info and trees, ``resolve`` downloads, uploads), without the caller's cookies;
  anything else is refused. The machine's own relay (``workloads/hub_relay.py``) listens on its loopback;
* with ``--log-cap <bytes>``, reads the workload's output through a pipe and keeps its log (the agent's standard
  output, a file opened for reading and writing) within that many bytes at every moment: when the next write would
  pass it, the log is rewritten in place to its newest half (:class:`CappedLog`);
* with ``--private`` (the job runs as its owner's own account), keeps everything it writes to that account: its
  folders 0700 and its files 0600 (the system disk itself is 0700), while the workload and JupyterLab create files
  with the usual umask 022. Without it, files are group-writable: the console's user shares the jobs' group;
* with ``--enter <pid> <program…>`` (alone), runs a program inside the bubblewrap sandbox whose first process is
  ``pid``, as the unprivileged account that started it: how a shell gets into a Slurm job's machine booted from an
  imported image (``instances.backends.slurm_image``), where ``nsenter`` cannot, as the sandbox's processes sit in a
  nested user namespace;
* trusts nothing the machine can write: every file it reads or writes on the system disk (the scalars, the
  checkpoint marker, the layout, the environment, JupyterLab's log) is opened from the system disk's own folder one
  component at a time without following links, non-blocking and only when it is a regular file, reads are capped,
  and files are replaced by a new file renamed into place (never written through), so a link, a FIFO or a device
  left there never leads the agent (on the local backend a host user outside the sandbox) to a file of the host,
  and never stalls its heartbeats (see "Files the machine can write").
"""

import argparse
import ctypes
import errno
import fcntl
import json
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
import sys
import time
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

# The variable each accelerator family's runtime reads to pick its cards.
VISIBILITY_VARIABLES = {
    "npu": "ASCEND_RT_VISIBLE_DEVICES",
    "mlu": "MLU_VISIBLE_DEVICES",
    "dcu": "HIP_VISIBLE_DEVICES",
    "cuda": "CUDA_VISIBLE_DEVICES",
}
# Slurm's gres/gpu plugin exports these with *global* indexes, which mean nothing to a non-NVIDIA runtime.
SLURM_GPU_VARIABLES = ("CUDA_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL", "ROCR_VISIBLE_DEVICES")
VENDOR_TOOLS = {"npu": "npu-smi", "mlu": "cnmon", "dcu": "hy-smi", "cuda": "nvidia-smi"}

MARKER = ".gpucloud/checkpoint.json"  # under the system disk's /root
LAYOUT = ".gpucloud/layout.json"  # under the system disk: the disks and mounts, kept across restarts
ENVIRONMENT = ".gpucloud/environment"  # under the system disk: the workload's variables, for shells in the job
JUPYTER_LOG = ".gpucloud/jupyter.log"  # under the system disk, beside the home JupyterLab shows


# Files the machine can write -----------------------------------------------------------------------------------
# The workload writes the system disk; on the local backend it is a sandbox whose files the agent, outside it as the
# same host user, reads and writes. A link there resolves on the agent's side, against the host's files, and a FIFO
# blocks whoever opens it. So the agent opens such a file from a folder it trusts (the system disk, or the home),
# one component at a time: each folder with O_NOFOLLOW | O_DIRECTORY held open and the next name looked up in it
# (a link anywhere is an error, never a detour, even if it is swapped in meanwhile), the file itself O_NOFOLLOW and
# O_NONBLOCK (a FIFO neither stalls the open nor a read) and kept only when it is a regular file.

MAX_FILE_BYTES = 1024 * 1024  # the most read of a small file the machine can write (the layout)
# O_PATH: a folder is only walked through, which needs search permission, not read (the instance's folder is 0711).
_FOLDER = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _parts(relative) -> list[str]:
    parts = [part for part in str(relative).split("/") if part]
    if not parts or any(part in (".", "..") for part in parts):
        raise OSError(errno.EINVAL, "not a plain relative path", str(relative))
    return parts


def open_folder(top: Path, parts: list[str], *, create: bool = False, made: list | None = None) -> int:
    """A descriptor of the folder ``top/<parts…>``, walked without following a link; with ``create``, missing
    folders are made (and appended to ``made``)."""
    fd = os.open(top, _FOLDER)
    try:
        for depth, part in enumerate(parts):
            if create:
                try:
                    os.mkdir(part, dir_fd=fd)
                    if made is not None:
                        made.append(Path(top, *parts[: depth + 1]))
                except FileExistsError:
                    pass
            following = os.open(part, _FOLDER, dir_fd=fd)
            os.close(fd)
            fd = following
        return fd
    except BaseException:
        os.close(fd)
        raise


def open_beneath(top: Path, relative, flags: int = os.O_RDONLY, mode: int = 0o666, *, create_folders=False) -> int:
    """A descriptor of the regular file ``top/relative``, opened without following a link below ``top`` and without
    blocking; anything but a regular file there (a FIFO, a device, a socket, a folder) raises OSError."""
    *folders, name = _parts(relative)
    folder = open_folder(top, folders, create=create_folders)
    try:
        fd = os.open(name, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, mode, dir_fd=folder)
    finally:
        os.close(folder)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(errno.EINVAL, "not a regular file", str(Path(top, relative)))
    return fd


def read_beneath(top: Path, relative, limit: int = MAX_FILE_BYTES) -> bytes:
    """At most ``limit`` bytes of the regular file ``top/relative`` (see :func:`open_beneath`)."""
    with os.fdopen(open_beneath(top, relative), "rb") as file:
        return file.read(limit)


def write_beneath(top: Path, relative, data: bytes, mode: int = 0o666, *, exact: bool = False) -> None:
    """``top/relative`` replaced whole by ``data``: a new file of the agent's own (O_EXCL, a name nobody chose)
    renamed over the name, so whatever was there — a link, a FIFO, a hard link to another file — is replaced, never
    written through. Missing folders are made, without following a link. ``exact``: ``mode`` whatever the umask."""
    *folders, name = _parts(relative)
    folder = open_folder(top, folders, create=True)
    try:
        staged = f".{name}.{os.getpid()}.{secrets.token_hex(4)}"
        fd = os.open(staged, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=folder)
        try:
            with os.fdopen(fd, "wb") as file:
                if exact:
                    os.fchmod(file.fileno(), mode)
                file.write(data)
            os.rename(staged, name, src_dir_fd=folder, dst_dir_fd=folder)
        except BaseException:
            try:
                os.unlink(staged, dir_fd=folder)
            except OSError:
                pass
            raise
    finally:
        os.close(folder)


# Cards ---------------------------------------------------------------------------------------------------------


def parse_indexes(value: str) -> list[int]:
    """``"16,17"`` or ``"16-19,22"`` → ``[16, 17]`` / ``[16, 17, 18, 19, 22]``."""
    found: list[int] = []
    for part in (value or "").split(","):
        part = part.strip()
        if not part or part.upper() == "N/A":
            continue
        if "-" in part:
            low, high = part.split("-", 1)
            found.extend(range(int(low), int(high) + 1))
        else:
            found.append(int(part))
    return found


def local_cards(job_gpus: str, offset: int) -> list[int]:
    """The allocated cards counted from the first card of this chip type on the node. Indexes below the offset
    cannot be global ones of this type: they are already counted per type and are kept as they are."""
    indexes = parse_indexes(job_gpus)
    if any(index < offset for index in indexes):
        return indexes
    return [index - offset for index in indexes]


def vendor_environment(family: str, cards: list[int], environ: dict) -> dict:
    """``environ`` with Slurm's global-index GPU variables replaced by the family's own visibility variable."""
    env = {k: v for k, v in environ.items() if k not in SLURM_GPU_VARIABLES}
    variable = VISIBILITY_VARIABLES.get(family)
    if variable:
        env[variable] = ",".join(str(c) for c in cards)
    return env


_VARIABLE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# Set per process (a shell sets its own) or per Slurm step (the shell's step has its own ids and cards).
_NOT_SHARED = ("PWD", "OLDPWD", "SHLVL", "_")


def write_environment(system: Path, env: dict) -> Path:
    """The workload's environment as a shell script (``export`` lines) on the system disk, readable by the jobs'
    user only: it holds the owner's secrets. A shell in the job sources it; Slurm's global-index GPU variables,
    which its step brings along, are unset first, as the workload never had them."""
    lines = [f"unset {' '.join(SLURM_GPU_VARIABLES)}"]
    for name, value in sorted(env.items()):
        if _VARIABLE_NAME.match(name) and name not in _NOT_SHARED and not name.startswith(("SLURM_", "SLURMD_")):
            lines.append(f"export {name}={shlex.quote(value)}")
    write_beneath(system, ENVIRONMENT, ("\n".join(lines) + "\n").encode(), mode=0o600)
    return system / ENVIRONMENT


# Directories ---------------------------------------------------------------------------------------------------


def _well_formed_mount(mount) -> bool:
    return isinstance(mount, dict) and isinstance(mount.get("target"), str) and isinstance(mount.get("source"), str)


def _folder_name(value) -> bool:
    """One name a folder can have: not empty, ".", "..", nor longer than a file system allows; no "/" or NUL."""
    return (
        isinstance(value, str)
        and value not in ("", ".", "..")
        and "/" not in value
        and "\0" not in value
        and len(value.encode("utf-8", "surrogatepass")) <= 255
    )


def disk_of(entry) -> tuple[str, str] | None:
    """A layout's data disk as (its id, its folder in /root/data), or None when the entry is malformed. An entry is
    ``{"id": …, "folder": …}``: the console names the folder (the disk's name, ``core.attaching.disk_folder``), the
    agent knows no names. A bare id is a layout written before disks had folders of their own: /root/data/<id>."""
    if isinstance(entry, str):
        return (entry, entry) if _folder_name(entry) else None
    if isinstance(entry, dict) and _folder_name(entry.get("id")) and _folder_name(entry.get("folder")):
        return entry["id"], entry["folder"]
    return None


def clean_layout(layout) -> dict:
    """Only the well-formed entries of a layout: the file is on the system disk, where the workload may write."""
    layout = layout if isinstance(layout, dict) else {}
    disks, mounts = layout.get("disks"), layout.get("mounts")
    disks = disks if isinstance(disks, list) else []
    mounts = mounts if isinstance(mounts, list) else []
    return {
        "disks": [d if isinstance(d, str) else {"id": d["id"], "folder": d["folder"]} for d in disks if disk_of(d)],
        "mounts": [m for m in mounts if _well_formed_mount(m)],
    }


def read_layout(system: Path) -> dict:
    try:
        return clean_layout(json.loads(read_beneath(system, LAYOUT)))
    except (OSError, ValueError):
        return {}


def write_layout(system: Path, layout: dict, mode: int | None = None) -> None:
    """The layout on the system disk; ``mode``: the file's, whatever the umask (else the umask's)."""
    data = json.dumps(layout, indent=1, sort_keys=True).encode()
    write_beneath(system, LAYOUT, data, mode or 0o666, exact=mode is not None)


def _link(system: Path, relative: str, target: str) -> list[Path]:
    """A link at ``system/relative`` to ``target``, its folders made as needed, none of them followed if a link."""
    made: list[Path] = []
    *folders, name = _parts(relative)
    folder = open_folder(system, folders, create=True, made=made)
    try:
        try:
            found = os.stat(name, dir_fd=folder, follow_symlinks=False)
        except FileNotFoundError:
            found = None
        if found is not None and stat.S_ISLNK(found.st_mode) and os.readlink(name, dir_fd=folder) == target:
            return made
        if found is not None and stat.S_ISDIR(found.st_mode):
            return made  # a real directory the user made there: never clobber data
        if found is not None:
            os.unlink(name, dir_fd=folder)  # an old link, or a file in the link's place
        os.symlink(target, name, dir_fd=folder)
    finally:
        os.close(folder)
    return [*made, Path(system, *folders, name)]


def _unlink_link(system: Path, relative: str) -> None:
    """Remove the link at ``system/relative``; anything else there, or a link on the way, is left alone."""
    *folders, name = _parts(relative)
    folder = open_folder(system, folders)
    try:
        if stat.S_ISLNK(os.stat(name, dir_fd=folder, follow_symlinks=False).st_mode):
            os.unlink(name, dir_fd=folder)
    finally:
        os.close(folder)


def layout_paths(root: Path, layout: dict) -> dict[str, str]:
    """Where each link of ``layout`` goes on the system disk (relative to it), and what it points at."""
    disks = [disk_of(entry) for entry in layout.get("disks", [])]
    links = {f"root/data/{folder}": str(root / "disks" / disk) for disk, folder in filter(None, disks)}
    links |= {m["target"].lstrip("/"): m["source"] for m in layout.get("mounts", [])}
    return links


def apply_layout(root: Path, system: Path, layout: dict, previous: dict | None = None) -> list[Path]:
    """Make the instance's view match ``layout``: a link per data disk (``/root/data/<folder>`` to the disk's own
    folder ``disks/<id>``, created when missing) and per mount (the user's storage, hub items); links of
    ``previous`` that are gone go. Returns the paths it made, so a caller running as another user can hand them to
    the jobs' user. A link or anything else the workload put on the way is never followed: that link is skipped."""
    made = []
    layout, previous = clean_layout(layout), clean_layout(previous or {})
    home = system / "root"
    if not home.exists():
        home.mkdir(parents=True)
        made.append(home)
    links = layout_paths(root, layout)
    for entry in layout["disks"]:
        target = root / "disks" / disk_of(entry)[0]
        try:
            if not target.exists():
                target.mkdir(parents=True)
                made.append(target)
        except OSError as exc:  # the machine starts whatever the layout holds
            sys.stderr.write(f"agent: cannot make the disk folder {target.name}: {exc}\n")
    for link, target in links.items():
        try:
            made += _link(system, link, target)
        except OSError as exc:
            sys.stderr.write(f"agent: cannot link /{link}: {exc}\n")
    for link in set(layout_paths(root, previous)) - set(links):
        try:
            _unlink_link(system, link)
        except OSError:
            pass
    return made


def write_marker(system: Path, *, signal_name: str, job_id: str, restart: int) -> dict:
    """The checkpoint marker in the home's ``.gpucloud``, replaced whole (see :func:`write_beneath`)."""
    marker = {
        "signal": signal_name,
        "at": datetime.now(UTC).isoformat(),
        "job_id": job_id,
        "restart_count": restart,
    }
    if not (system / "root").is_dir():
        return marker  # the system disk is gone (released): nothing to write on
    write_beneath(system / "root", MARKER, json.dumps(marker).encode())
    return marker


# Metrics -------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CardSample:
    index: int
    utilisation: float  # percent
    memory_used: float  # percent


def _pct(used: float, total: float) -> float:
    return round(100 * used / total, 1) if total else 0.0


def parse_nvidia_smi(text: str) -> list[CardSample]:
    """``nvidia-smi --query-gpu=index,utilization.gpu,memory.used,memory.total --format=csv,noheader,nounits``."""
    samples = []
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 4 and parts[0].isdigit():
            samples.append(CardSample(int(parts[0]), float(parts[1]), _pct(float(parts[2]), float(parts[3]))))
    return samples


_NPU_CHIP_ROW = re.compile(r"^\|\s*(\d+)\s+\|\s*[0-9A-Fa-f:.]+\s*\|\s*(\d+)\s+(\d+)\s*/\s*(\d+)\s+(\d+)\s*/\s*(\d+)")
_NPU_HEAD_ROW = re.compile(r"^\|\s*(\d+)\s+\S+.*\|\s*\w+\s*\|")


def parse_npu_smi(text: str) -> list[CardSample]:
    """``npu-smi info``: two rows per NPU, the second holding AICore(%), Memory-Usage(MB) and HBM-Usage(MB).
    Memory is the HBM share (the card's own memory)."""
    samples, npu = [], None
    for line in text.splitlines():
        chip = _NPU_CHIP_ROW.match(line)
        if chip and npu is not None:
            aicore, hbm_used, hbm_total = float(chip[2]), float(chip[5]), float(chip[6])
            samples.append(CardSample(npu, aicore, _pct(hbm_used, hbm_total)))
            npu = None
            continue
        head = _NPU_HEAD_ROW.match(line)
        if head and "Name" not in line:
            npu = int(head[1])
    return samples


_CNMON_CARD_ROW = re.compile(r"^\|\s*(\d+)\s+\S+\s+MLU\S*.*\|\s*\S+\s*\|\s*(\d+)%")
_CNMON_MEM_ROW = re.compile(r"\|\s*(\d+)\s*MiB\s*/\s*(\d+)\s*MiB\s*\|")


def parse_cnmon(text: str) -> list[CardSample]:
    """``cnmon``'s card table: a row with Card and Util, then a row with Memory-Usage."""
    samples, card = [], None
    for line in text.splitlines():
        head = _CNMON_CARD_ROW.match(line)
        if head:
            card = (int(head[1]), float(head[2]))
            continue
        memory = _CNMON_MEM_ROW.search(line)
        if memory and card is not None:
            samples.append(CardSample(card[0], card[1], _pct(float(memory[1]), float(memory[2]))))
            card = None
    return samples


def parse_hy_smi(text: str) -> list[CardSample]:
    """``hy-smi`` (Hygon's rocm-smi): a header with DCU, VRAM% and DCU% columns, then one row per card."""
    samples, columns = [], None
    for line in text.splitlines():
        fields = line.split()
        if fields and fields[0] == "DCU" and "DCU%" in fields and "VRAM%" in fields:
            columns = {name: i for i, name in enumerate(fields)}
            continue
        if columns and fields and fields[0].isdigit() and len(fields) >= len(columns):
            util = float(fields[columns["DCU%"]].rstrip("%"))
            memory = float(fields[columns["VRAM%"]].rstrip("%"))
            samples.append(CardSample(int(fields[0]), util, memory))
    return samples


PARSERS = {"npu": parse_npu_smi, "mlu": parse_cnmon, "dcu": parse_hy_smi, "cuda": parse_nvidia_smi}
TOOL_ARGUMENTS = {
    "npu": ["info"],
    "mlu": [],
    "dcu": [],
    "cuda": ["--query-gpu=index,utilization.gpu,memory.used,memory.total", "--format=csv,noheader,nounits"],
}


class HostSampler:
    """CPU and memory of the host, for nodes without the vendor's tool (reported with source ``host``)."""

    def __init__(self, proc: Path = Path("/proc")):
        self.proc = proc
        self.last: tuple[int, int] | None = None

    def _cpu_times(self) -> tuple[int, int]:
        fields = [int(x) for x in (self.proc / "stat").read_text().splitlines()[0].split()[1:]]
        idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
        return sum(fields), idle

    def sample(self) -> dict:
        total, idle = self._cpu_times()
        cpu = 0.0
        if self.last is not None and total > self.last[0]:
            cpu = _pct((total - self.last[0]) - (idle - self.last[1]), total - self.last[0])
        self.last = (total, idle)
        info = {}
        for line in (self.proc / "meminfo").read_text().splitlines():
            name, _sep, rest = line.partition(":")
            info[name] = int(rest.split()[0]) if rest.split() else 0
        memory = _pct(info.get("MemTotal", 0) - info.get("MemAvailable", 0), info.get("MemTotal", 0))
        return {"source": "host", "card_utilisation": cpu, "memory_used": memory, "cards": []}


class CgroupSampler:
    """CPU and memory of the cgroup this agent and its workload run in: the machine's own share and limit, for a
    machine without cards (reported with source ``cgroup``). CPU is the share of the cgroup's CPU quota (the
    host's CPUs where it has none) used since the last sample; memory is what the cgroup uses of its limit (the
    host's memory where it has none). Cgroup v2, or v1 with the memory, cpu and cpuacct controllers."""

    def __init__(self, proc: Path = Path("/proc"), cgroups: Path = Path("/sys/fs/cgroup"), clock=time.monotonic):
        self.proc = proc
        self.clock = clock
        self.path: Path | None = None  # v2: the cgroup's folder
        self.v1: dict[str, Path] = {}  # v1: each controller's folder
        try:
            for line in (proc / "self" / "cgroup").read_text().splitlines():
                hierarchy, controllers, path = line.split(":", 2)
                relative = path.lstrip("/")
                if hierarchy == "0" and not controllers and (cgroups / relative / "memory.current").exists():
                    self.path = cgroups / relative
                for controller in controllers.split(","):
                    if controller in ("memory", "cpu", "cpuacct") and relative:
                        self.v1[controller] = cgroups / controller / relative
        except (OSError, ValueError):
            self.path, self.v1 = None, {}
        if self.path is None and not {"memory", "cpuacct"} <= set(self.v1):
            self.v1 = {}
        self.last: tuple[float, float] | None = None

    @property
    def available(self) -> bool:
        return self.path is not None or bool(self.v1)

    def _read(self, folder: Path, name: str) -> str:
        return (folder / name).read_text().strip()

    def _cpu_seconds(self) -> float:
        if self.path is not None:
            stat = self._read(self.path, "cpu.stat").splitlines()
            return next(int(line.split()[1]) for line in stat if line.startswith("usage_usec")) / 1e6
        return int(self._read(self.v1["cpuacct"], "cpuacct.usage")) / 1e9

    def _cpus(self) -> float:
        if self.path is not None:
            quota, _sep, period = self._read(self.path, "cpu.max").partition(" ")
        elif "cpu" in self.v1:
            quota, period = (
                self._read(self.v1["cpu"], "cpu.cfs_quota_us"),
                self._read(self.v1["cpu"], "cpu.cfs_period_us"),
            )
        else:
            quota, period = "max", ""
        if quota in ("max", "-1") or not period:
            return float(os.cpu_count() or 1)
        return max(int(quota) / int(period), 0.01)

    def _host_memory(self) -> int:
        for line in (self.proc / "meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
        return 0

    def _memory(self) -> tuple[int, int]:
        if self.path is not None:
            used, limit = self._read(self.path, "memory.current"), self._read(self.path, "memory.max")
        else:
            used = self._read(self.v1["memory"], "memory.usage_in_bytes")
            limit = self._read(self.v1["memory"], "memory.limit_in_bytes")
        host = self._host_memory()
        limit = host if limit == "max" else min(int(limit), host or int(limit))  # v1 says "none" with a huge number
        return int(used), limit

    def sample(self) -> dict:
        used_cpu, now = self._cpu_seconds(), self.clock()
        cpu = 0.0
        if self.last is not None and now > self.last[0]:
            cpu = min(100.0, _pct(used_cpu - self.last[1], (now - self.last[0]) * self._cpus()))
        self.last = (now, used_cpu)
        used, limit = self._memory()
        return {"source": "cgroup", "card_utilisation": cpu, "memory_used": _pct(used, limit), "cards": []}


def card_metrics(family: str, cards: list[int], output: str) -> dict:
    """The vendor tool's ``output`` reduced to the instance's cards: the mean utilisation and memory share."""
    parser = PARSERS.get(family)
    samples = [s for s in (parser(output) if parser else []) if not cards or s.index in cards]
    if not samples:
        raise ValueError("no card of this instance in the tool's output")
    return {
        "source": VENDOR_TOOLS[family],
        "card_utilisation": round(sum(s.utilisation for s in samples) / len(samples), 1),
        "memory_used": round(sum(s.memory_used for s in samples) / len(samples), 1),
        "cards": [asdict(s) for s in samples],
    }


def collect_metrics(family: str, cards: list[int], host: HostSampler, machine: CgroupSampler | None = None) -> dict:
    """The cards' figures from the vendor's tool; without one, the machine's own cgroup; else the host's."""
    tool = shutil.which(VENDOR_TOOLS.get(family, ""))
    if tool:
        try:
            result = subprocess.run([tool, *TOOL_ARGUMENTS[family]], capture_output=True, text=True, timeout=10)
            return card_metrics(family, cards, result.stdout)
        except (OSError, subprocess.SubprocessError, ValueError):
            pass  # a broken tool must not stop the heartbeat: fall back to the machine's or the host's figures
    if machine is not None and machine.available:
        try:
            return machine.sample()
        except (OSError, ValueError, StopIteration):
            pass
    return host.sample()


# Training scalars ---------------------------------------------------------------------------------------------

SCALARS_FILE = ".gpucloud/scalars.jsonl"
MAX_SCALARS_PER_REPORT = 500
MAX_SCALAR_BYTES = 1024 * 1024  # read of the scalars file a report at most
MAX_SCALAR_LINE = 64 * 1024  # a longer line is no scalar: skipped


def parse_scalar(line: str) -> dict | None:
    """One JSON line the workload wrote — ``{"tag": "loss", "step": 10, "value": 0.73[, "time": <unix>]}`` — as
    the report's shape, or None for anything else (a half-written line, text, a NaN)."""
    try:
        item = json.loads(line)
        tag, step, value = str(item["tag"]).strip(), int(item["step"]), float(item["value"])
    except (ValueError, KeyError, TypeError, AttributeError):
        return None
    if not tag or len(tag) > 64 or step < 0 or not math.isfinite(value):
        return None
    scalar = {"tag": tag, "step": step, "value": value}
    when = item.get("time")
    if isinstance(when, int | float) and math.isfinite(when) and when > 0:
        scalar["time"] = datetime.fromtimestamp(when, UTC).isoformat()
    return scalar


class ScalarTail:
    """The new complete lines of the workload's scalars file since the last report (a partial last line waits).

    The file is the workload's: it is opened below ``home`` (by default its own folder) without following a link,
    only when it is a regular file (see :func:`open_beneath`), and at most ``MAX_SCALAR_BYTES`` are read a report;
    a line longer than ``MAX_SCALAR_LINE`` is skipped whole."""

    def __init__(self, path: Path, home: Path | None = None):
        self.path = path
        self.home = home or path.parent
        self.relative = path.relative_to(self.home)
        self.offset = 0
        self.inode = None
        self.skipping = False  # inside a line too long to be a scalar: dropped up to its end

    def read(self, limit: int = MAX_SCALARS_PER_REPORT) -> list[dict]:
        try:
            with os.fdopen(open_beneath(self.home, self.relative), "rb") as f:
                found = os.fstat(f.fileno())
                if found.st_size < self.offset or found.st_ino != self.inode:
                    self.offset, self.skipping = 0, False  # the workload truncated or replaced the file: all new
                self.inode = found.st_ino
                f.seek(self.offset)
                return self._lines(f.read(MAX_SCALAR_BYTES), limit)
        except OSError:
            return []

    def _lines(self, data: bytes, limit: int) -> list[dict]:
        scalars, start = [], 0
        while len(scalars) < limit:
            end = data.find(b"\n", start)
            if end < 0:
                if start == 0 and len(data) >= MAX_SCALAR_LINE:
                    self.offset, self.skipping = self.offset + len(data), True  # no line end in sight: skip it
                break  # end of file, or a line still being written
            line, start = data[start : end + 1], end + 1
            self.offset += len(line)
            if self.skipping or len(line) > MAX_SCALAR_LINE:
                self.skipping = False
                continue
            scalar = parse_scalar(line.decode("utf-8", "replace"))
            if scalar is not None:
                scalars.append(scalar)
        return scalars


# JupyterLab ----------------------------------------------------------------------------------------------------


def node_address(environ: dict) -> str:
    """The node's own address, where JupyterLab listens: its Slurm name (``SLURMD_NODENAME``) resolved, as the
    console resolves the job's node when it checks the address this agent reports."""
    name = environ.get("SLURMD_NODENAME") or socket.gethostname()
    try:
        return socket.getaddrinfo(name, None, socket.AF_INET, socket.SOCK_STREAM)[0][4][0]
    except (OSError, IndexError):
        return name


def free_port(host: str) -> int:
    """A port nothing listens on at ``host`` now (JupyterLab takes it a moment later, or exits if it cannot)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        return probe.getsockname()[1]


def jupyter_command(program: str, *, host: str, port: int, base_url: str, root_dir: Path) -> list[str]:
    """JupyterLab's argv: ``program`` is a Python with JupyterLab installed, or a ``jupyter`` script. Its token comes
    from ``JUPYTER_TOKEN`` in the environment, never the command line. It ignores SIGUSR1 (its kernels too, unless
    their code sets a handler): the checkpoint signal is for the workload."""
    start = [program, "lab"] if Path(program).name.startswith("jupyter") else [program, "-m", "jupyterlab"]
    options = [
        "--no-browser",
        f"--ServerApp.ip={host}",
        f"--ServerApp.port={port}",
        "--ServerApp.port_retries=0",
        f"--ServerApp.base_url={base_url}",
        f"--ServerApp.root_dir={root_dir}",
        "--LabApp.news_url=None",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
    ]
    if os.geteuid() == 0:
        options.append("--allow-root")
    return ["/bin/sh", "-c", 'trap "" USR1; exec "$@"', "sh", *start, *options]


class JupyterLab:
    """The instance's JupyterLab on the node: started beside the workload, probed until it answers, stopped with
    the agent. ``url`` (``http://<node address>:<port>``) is set while it answers, for the reports."""

    PROBE_EVERY = 0.5  # seconds

    def __init__(self, program: str, *, host: str, base_url: str, root_dir: Path, log: Path, beneath=None):
        self.program = program
        self.host = host
        self.base_url = base_url
        self.root_dir = root_dir
        self.log = log
        self.beneath = beneath or log.parent  # the log is opened below this folder without following a link
        self.process: subprocess.Popen | None = None
        self.url: str | None = None
        self.failed = False
        self.next_probe = 0.0
        self.token = ""
        self.candidate = ""

    def start(self, env: dict, umask: int = -1) -> None:
        self.token = env.get("JUPYTER_TOKEN", "")
        if not self.token:
            self._give_up("no JUPYTER_TOKEN in the job's environment: JupyterLab is not started")
            return
        try:
            port = free_port(self.host)
            command = jupyter_command(
                self.program, host=self.host, port=port, base_url=self.base_url, root_dir=self.root_dir
            )
            self.candidate = f"http://{f'[{self.host}]' if ':' in self.host else self.host}:{port}"
            flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND
            with os.fdopen(open_beneath(self.beneath, self.log.relative_to(self.beneath), flags), "ab") as log:
                # A session of its own: a signal for the workload's process group never reaches it.
                self.process = subprocess.Popen(
                    command,
                    env=env,
                    cwd=self.root_dir,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                    umask=umask,
                )
        except OSError as exc:
            self._give_up(f"cannot start JupyterLab ({self.program}): {exc}")

    @property
    def settled(self) -> bool:
        """It answers, or it never will."""
        return self.url is not None or self.failed

    def check(self, now: float) -> bool:
        """Probe it when due; True when it has just begun to answer."""
        if self.process is None or self.failed:
            return False
        code = self.process.poll()
        if code is not None:
            self.url = None
            self._give_up(f"JupyterLab exited with status {code} (its log: {self.log})")
            return False
        if self.url is not None or now < self.next_probe:
            return False
        self.next_probe = now + self.PROBE_EVERY
        if self._answers():
            self.url = self.candidate
            return True
        return False

    def _answers(self) -> bool:
        request = urllib.request.Request(
            f"{self.candidate}{self.base_url}api/status", headers={"Authorization": f"token {self.token}"}
        )
        # No proxy from the job's environment: the address is the node's own.
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        try:
            with opener.open(request, timeout=1) as response:
                return response.status == 200
        except (urllib.error.URLError, OSError, ValueError):
            return False

    def stop(self, wait: float = 5.0) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        for signum in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(self.process.pid, signum)
            except ProcessLookupError:
                return
            try:
                self.process.wait(timeout=wait)
                return
            except subprocess.TimeoutExpired:
                continue

    def _give_up(self, message: str) -> None:
        if not self.failed:
            sys.stderr.write(f"agent: {message}\n")
            sys.stderr.flush()
        self.failed = True


# The agent -----------------------------------------------------------------------------------------------------


# The hub's Hugging Face API, and nothing else of the console, is what a machine may ask for through the relay:
# the addresses of ``marketplace/hub/hf_urls.py``, each matched whole.
_PART = r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,98}[A-Za-z0-9])?"
_REPO = _PART + "/" + _PART
_REV = r"[^/?#]+"
HUB_ADDRESSES = re.compile(
    r"^/(?:api/repos/(?:create|delete)/?|api/validate-yaml/?|api/whoami-v2/?|api/(?:models|datasets)/?"
    r"|api/(?:models|datasets)/"
    + _REPO
    + r"(?:/(?:revision/"
    + _REV
    + r"|tree/"
    + _REV
    + r"(?:/[^?#]*)?|preupload/"
    + _REV
    + r"|commit/"
    + _REV
    + r"|xet-write-token/"
    + _REV
    + r"|settings))?/?"
    r"|hub-lfs/[0-9a-f]{64}(?:/verify)?"
    r"|hub-xet/v1/(?:shards|(?:xorbs|xorb-grants)/default/[0-9a-f]{64}|chunks/default-merkledb/[0-9a-f]{64})"
    r"|(?:datasets/)?" + _REPO + r"\.git/info/lfs/objects/batch"
    r"|(?:datasets/)?" + _REPO + r"/resolve/" + _REV + r"/[^?#]+)"
    r"(?:\?[^#]*)?$"
)
_HUB_API = re.compile(
    r"^/api/(?:models/|datasets/|(?:models|datasets|repos/create|repos/delete|validate-yaml|whoami-v2)/?(?:\?|$))"
)
HUB_METHODS = {"GET", "HEAD", "POST", "PUT", "DELETE"}
# First path segments of the console's own pages and APIs: never the hub's, whatever the rest looks like.
_CONSOLE_ROOTS = {
    "instances",
    "billing",
    "ops",
    "accounts",
    "console",
    "storage",
    "teams",
    "hub",
    "admin",
    "v1",
    "endpoints",
    "marketplace",
    "catalog",
    "i18n",
    "static",
    "media",
    "healthz",
    "pricing",
    "chips",
    "estimator",
}
_HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
# Headers the relay sets itself or never passes on: the connection's, cookies, and claims about the caller.
_DROPPED_HEADERS = {
    "connection",
    "keep-alive",
    "cookie",
    "proxy-authorization",
    "proxy-connection",
    "host",
    "forwarded",
    "x-forwarded-for",
    "x-forwarded-host",
    "x-forwarded-proto",
    "x-real-ip",
    "content-length",
    "transfer-encoding",
    "te",
    "upgrade",
    "expect",
}
RELAY_HOST = "127.0.0.1:8860"  # the machine's side of the relay: what addresses the console builds point back to
MAX_HEAD = 64 * 1024


def hub_request_allowed(method: str, target: str) -> bool:
    lowered = target.lower()
    if method not in HUB_METHODS or not target.startswith("/") or any(c in target for c in "\\\x00 \t"):
        return False
    if ".." in target or "%2e" in lowered or "%2f" in lowered or "%5c" in lowered or "%00" in lowered:
        return False
    first = target[1:].split("/", 1)[0].split("?", 1)[0]
    if first in _CONSOLE_ROOTS:
        return False
    if first == "api" and not _HUB_API.match(target):
        return False  # the console's REST API (/api/v1/…) and its schema are not the hub's
    return HUB_ADDRESSES.match(target) is not None


class BadRequest(Exception):
    pass


def parse_request(head: bytes) -> tuple[str, str, list[tuple[str, str]], int]:
    """(method, target, headers, body length) of one HTTP/1.1 request head, read strictly: CRLF line ends only, no
    folded or malformed headers, a body only by Content-Length (no chunked bodies), so exactly one request is
    passed on however the bytes were crafted."""
    try:
        text = head.decode("ascii")
    except UnicodeDecodeError:
        raise BadRequest("non-ASCII request head") from None
    lines = text.split("\r\n")
    if any("\n" in line or "\r" in line for line in lines):
        raise BadRequest("a bare line feed or carriage return")
    parts = lines[0].split(" ")
    if len(parts) != 3 or parts[2] not in ("HTTP/1.1", "HTTP/1.0"):
        raise BadRequest("a malformed request line")
    headers, length = [], 0
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if not sep or not _HEADER_NAME.match(name) or line[:1] in (" ", "\t"):
            raise BadRequest("a malformed header")
        name, value = name.strip(), value.strip()
        lowered = name.lower()
        if lowered == "transfer-encoding":
            raise BadRequest("chunked bodies are not relayed: send Content-Length")
        if lowered == "content-length":
            if not value.isdigit() or (length and int(value) != length):
                raise BadRequest("a malformed Content-Length")
            length = int(value)
        if lowered not in _DROPPED_HEADERS:
            headers.append((name, value))
    return parts[0], parts[1], headers, length


class HubRelay:
    """The console's hub for a machine without a network, on a Unix socket (see the module's description)."""

    def __init__(self, path: Path, console: str):
        from urllib.parse import urlsplit

        parts = urlsplit(console)
        self.path = path
        self.upstream = (parts.hostname or "127.0.0.1", parts.port or (443 if parts.scheme == "https" else 80))
        self.secure = parts.scheme == "https"
        self.server: socket.socket | None = None

    def start(self) -> None:
        import threading

        self.path.unlink(missing_ok=True)
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        # The socket is made 0600 as it is bound (no chmod afterwards: the machine writes this folder, and chmod
        # would follow a link it put in the socket's place). bind never follows a link at the name either.
        previous = os.umask(0o177)
        try:
            server.bind(str(self.path))
        finally:
            os.umask(previous)
        server.listen(64)
        self.server = server
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        import threading

        while True:
            try:
                client, _address = self.server.accept()
            except OSError:
                return
            threading.Thread(target=self._handle, args=(client,), daemon=True).start()

    @staticmethod
    def _refuse(client, status: bytes, text: bytes) -> None:
        client.sendall(
            b"HTTP/1.1 " + status + b"\r\nContent-Type: application/json\r\nConnection: close\r\n"
            b"Content-Length: " + str(len(text)).encode() + b"\r\n\r\n" + text
        )

    def _handle(self, client) -> None:
        import threading

        upstream = None
        try:
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = client.recv(65536)
                if not chunk or len(data) > MAX_HEAD:
                    return
                data += chunk
            head, body = data.split(b"\r\n\r\n", 1)
            try:
                method, target, headers, length = parse_request(head)
            except BadRequest:
                self._refuse(client, b"400 Bad Request", b'{"error": "A malformed request."}')
                return
            if not hub_request_allowed(method, target):
                self._refuse(client, b"403 Forbidden", b'{"error": "Only the model hub is reachable from here."}')
                return
            body = body[:length]  # what came with the head; anything past the announced body is dropped
            rebuilt = [
                f"{method} {target} HTTP/1.1",
                f"Host: {RELAY_HOST}",
                *(f"{n}: {v}" for n, v in headers),
                f"Content-Length: {length}" if length or method in ("POST", "PUT") else "",
                "Connection: close",
            ]
            upstream = socket.create_connection(self.upstream, timeout=30)
            if self.secure:
                import ssl

                upstream = ssl.create_default_context().wrap_socket(upstream, server_hostname=self.upstream[0])
            upstream.settimeout(None)
            upstream.sendall("\r\n".join(line for line in rebuilt if line).encode("ascii") + b"\r\n\r\n" + body)
            left = length - len(body)
            while left > 0:  # the rest of the body streamed through, exactly the announced length
                chunk = client.recv(min(1024 * 1024, left))
                if not chunk:
                    return
                upstream.sendall(chunk)
                left -= len(chunk)
            answer = threading.Thread(target=_pipe, args=(upstream, client), daemon=True)
            answer.start()
            answer.join()  # the console closes after its one answer (Connection: close)
        except OSError:
            pass
        finally:
            if upstream is not None:
                upstream.close()
            client.close()


def _pipe(source, target) -> None:
    try:
        while chunk := source.recv(65536):
            target.sendall(chunk)
    except OSError:
        pass
    finally:
        try:
            target.shutdown(socket.SHUT_WR)
        except OSError:
            pass


class CappedLog:
    """A log file of at most ``cap`` bytes, written through a descriptor opened for reading and writing (not
    appending). When a write would pass the cap, the newest ``cap // 2`` bytes (of the file and the write) are
    written at its start and the file is cut after them: the file never holds more than ``cap`` bytes, and its end,
    which is what a reader of its last lines reads, always holds the newest output."""

    def __init__(self, fd: int, cap: int):
        self.fd = fd
        self.cap = max(2, cap)
        self.end = os.lseek(fd, 0, os.SEEK_END)

    def write(self, data: bytes) -> None:
        if self.end + len(data) <= self.cap:
            os.pwrite(self.fd, data, self.end)
            self.end += len(data)
            return
        keep = self.cap // 2
        data = data[-keep:]
        older = keep - len(data)
        kept = os.pread(self.fd, older, max(0, self.end - older)) if older else b""
        newest = kept + data
        os.pwrite(self.fd, newest, 0)
        os.ftruncate(self.fd, len(newest))
        self.end = len(newest)

    def pump(self, source) -> None:
        """Copy ``source`` (the workload's output pipe) into the log until it closes."""
        while True:
            chunk = os.read(source.fileno(), 65536)
            if not chunk:
                return
            try:
                self.write(chunk)
            except OSError as exc:  # the host's disk is full: drop the output rather than stall the workload
                sys.stderr.write(f"agent: cannot write the log: {exc}\n")


class Agent:
    def __init__(self, options, environ: dict):
        self.options = options
        self.environ = environ
        self.root = Path(options.root)
        self.system = self.root / "instances" / options.instance
        self.job_id = environ.get("SLURM_JOB_ID", "")
        self.restart = int(environ.get("SLURM_RESTART_COUNT", "0") or 0)
        self.cards = local_cards(environ.get("SLURM_JOB_GPUS", ""), options.offset)
        self.token = environ.get("GPUCLOUD_AGENT_TOKEN", "")
        self.host = HostSampler()
        self.machine = CgroupSampler()
        self.workload: subprocess.Popen | None = None
        self.log_pump = None  # the thread that copies the workload's output into its capped log
        self.stopping_since: float | None = None
        self.checkpoint: dict | None = None
        self.layout: dict = {}
        self.scalars = ScalarTail(self.system / "root" / SCALARS_FILE, home=self.system / "root")
        self.unsent: list[dict] = []  # scalars of a report that failed: sent with the next one
        self.lab: JupyterLab | None = None
        if options.jupyter:
            self.lab = JupyterLab(
                options.jupyter,
                host=options.jupyter_host or node_address(environ),
                base_url=f"/instances/{options.instance}/lab/",
                root_dir=self.system / "root",
                log=self.system / JUPYTER_LOG,
                beneath=self.system,
            )

    def lay_out(self) -> None:
        # Private: the account's alone. Shared: the console's user shares the group (it hot-plugs links and deletes
        # the system disk).
        os.umask(0o077 if self.options.private else 0o002)
        self.system.mkdir(parents=True, exist_ok=True)
        if self.options.private:
            self.system.chmod(0o700)
        # The console writes the layout (``backends.slurm``: disks, /root/shared, hub items); the agent applies it
        # at start and on every heartbeat, so hot-plugged disks and mounts appear on whichever node runs it.
        self.layout = read_layout(self.system)
        apply_layout(self.root, self.system, self.layout)

    @property
    def child_umask(self) -> int:
        """The workload's and JupyterLab's umask: the usual 022 in a private system disk, else the agent's own."""
        return 0o022 if self.options.private else -1

    def workload_environment(self) -> dict:
        env = vendor_environment(self.options.family, self.cards, self.environ)
        env["HOME"] = str(self.system / "root")
        env["GPUCLOUD_INSTANCE"] = self.options.instance
        env["GPUCLOUD_CHECKPOINT_MARKER"] = str(self.system / "root" / MARKER)
        env["GPUCLOUD_SCALARS"] = str(self.scalars.path)  # JSON lines: the training curves on the instance page
        env.pop("GPUCLOUD_AGENT_TOKEN", None)  # the workload never sees the agent's credential
        return env

    def start_workload(self) -> None:
        env = self.workload_environment()
        try:  # the scalars' folder, for the workload to write in (whatever the home holds there is the user's)
            os.close(open_folder(self.system / "root", _parts(SCALARS_FILE)[:-1], create=True))
        except OSError as exc:
            sys.stderr.write(f"agent: no folder for the scalars file: {exc}\n")
        write_environment(self.system, env)
        command = self.options.workload or ["sleep", "infinity"]
        capped = self.options.log_cap > 0
        self.workload = subprocess.Popen(
            command,
            env=env,
            cwd=self.system / "root",
            start_new_session=True,
            umask=self.child_umask,
            stdout=subprocess.PIPE if capped else None,
            stderr=subprocess.STDOUT if capped else None,
        )
        if capped:
            import threading

            log = CappedLog(sys.stdout.fileno(), self.options.log_cap)
            self.log_pump = threading.Thread(target=log.pump, args=(self.workload.stdout,), daemon=True)
            self.log_pump.start()
        if self.lab is not None:
            self.lab.start(env, umask=self.child_umask)

    def on_signal(self, signum, _frame) -> None:
        name = signal.Signals(signum).name
        try:
            self.checkpoint = write_marker(self.system, signal_name=name, job_id=self.job_id, restart=self.restart)
        except OSError as exc:  # the home's .gpucloud is not writable (the user replaced it): pass the signal on
            sys.stderr.write(f"agent: cannot write the checkpoint marker: {exc}\n")
        self._forward(signum)
        if signum == signal.SIGTERM and self.stopping_since is None:
            self.stopping_since = time.monotonic()
        self.report("checkpoint")

    def _forward(self, signum) -> None:
        if self.workload and self.workload.poll() is None:
            try:
                os.killpg(self.workload.pid, signum)
            except ProcessLookupError:
                pass

    def report(self, event: str, exit_code: int | None = None) -> None:
        if not (self.options.console and self.token):
            return
        body = {
            "event": event,
            "job_id": self.job_id,
            "restart_count": self.restart,
            "cards": self.cards,
            "metrics": collect_metrics(self.options.family, self.cards, self.host, self.machine),
            "checkpoint": self.checkpoint,
            "scalars": self.unsent + self.scalars.read(MAX_SCALARS_PER_REPORT - len(self.unsent)),
            "jupyter": {"url": self.lab.url} if self.lab is not None and self.lab.url else None,
        }
        if exit_code is not None:
            body["exit_code"] = exit_code
        url = f"{self.options.console.rstrip('/')}/api/v1/agent/instances/{self.options.instance}/reports"
        request = urllib.request.Request(
            url,
            data=json.dumps(body).encode(),
            method="POST",
            headers={"Content-Type": "application/json", "Authorization": f"Agent {self.token}"},
        )
        try:
            urllib.request.urlopen(request, timeout=5).close()
            self.unsent = []
        except (urllib.error.URLError, OSError) as exc:
            self.unsent = body["scalars"]
            sys.stderr.write(f"agent: report {event!r} failed: {exc}\n")
            sys.stderr.flush()

    def run(self) -> int:
        self.lay_out()
        if self.options.hub_socket and self.options.console:
            try:
                HubRelay(Path(self.options.hub_socket), self.options.console).start()
            except OSError as exc:  # something the machine left at the socket's name: the machine runs without
                sys.stderr.write(f"agent: the hub is not served: {exc}\n")
        signal.signal(signal.SIGUSR1, self.on_signal)
        signal.signal(signal.SIGTERM, self.on_signal)
        try:
            self.start_workload()
            return self.supervise()
        finally:
            if self.lab is not None:
                self.lab.stop()

    def supervise(self) -> int:
        began = time.monotonic()
        next_report = None  # the first report waits for JupyterLab: the instance is running once it is there
        while True:
            code = self.workload.poll()
            now = time.monotonic()
            answering = self.lab is not None and self.lab.check(now)
            if next_report is None:
                if code is None and self._waiting_for_lab(began, now):
                    time.sleep(0.1)
                    continue
                self.report("started")
                next_report = now + self.options.interval
            elif answering:
                self.report("heartbeat")  # the lab's address without waiting for the next beat
            if code is not None:
                if self.log_pump is not None:
                    self.log_pump.join(timeout=2)  # the workload's last words into the log
                status = 128 - code if code < 0 else code  # killed by signal N: the shell's 128 + N
                self.report("exited", exit_code=status)
                return status
            if self.stopping_since is not None and now - self.stopping_since > self.options.grace:
                self._forward(signal.SIGKILL)
            if now >= next_report and self.stopping_since is None:
                layout = read_layout(self.system)
                try:
                    apply_layout(self.root, self.system, layout, previous=self.layout)
                    self.layout = layout
                except OSError as exc:  # the heartbeat goes on whatever the system disk holds
                    sys.stderr.write(f"agent: cannot apply the layout: {exc}\n")
                self.report("heartbeat")
                next_report = now + self.options.interval
            time.sleep(0.1)

    def _waiting_for_lab(self, began: float, now: float) -> bool:
        """Whether the first report still waits for JupyterLab: until it answers or fails, a stop begins, or
        ``--jupyter-wait`` has passed (the instance then runs without it)."""
        if self.lab is None or self.lab.settled or self.stopping_since is not None:
            return False
        return now - began <= self.options.jupyter_wait


def parse_args(argv):
    parser = argparse.ArgumentParser(description="The GPU cloud's instance agent (run by the instance's job).")
    parser.add_argument("--instance", required=True, help="the instance's public id")
    parser.add_argument("--root", required=True, help="the instance root on the node (shared by the zone)")
    parser.add_argument("--family", required=True, choices=[*sorted(VISIBILITY_VARIABLES), "cpu"])
    parser.add_argument("--offset", type=int, default=0, help="the node's first GRES index of this chip type")
    parser.add_argument("--console", default="", help="the console's base URL for reports")
    parser.add_argument("--interval", type=float, default=15.0, help="seconds between heartbeats")
    parser.add_argument("--grace", type=float, default=20.0, help="seconds the workload gets after SIGTERM")
    parser.add_argument("--jupyter", default="", help="a Python with JupyterLab (or its jupyter): run it beside")
    parser.add_argument("--jupyter-host", default="", help="JupyterLab's address (default: the node's own)")
    parser.add_argument(
        "--jupyter-wait", type=float, default=60.0, help="seconds the first report waits for JupyterLab to answer"
    )
    parser.add_argument(
        "--private", action="store_true", help="the job runs as its owner's own account: keep what it writes to it"
    )
    parser.add_argument("--hub-socket", default="", help="serve the console's model hub on this Unix socket")
    parser.add_argument(
        "--log-cap", type=int, default=0, help="keep the workload's output (standard output) within this many bytes"
    )
    parser.add_argument("workload", nargs=argparse.REMAINDER, help="-- the command to run (default: sleep)")
    options = parser.parse_args(argv)
    if options.workload and options.workload[0] == "--":
        options.workload = options.workload[1:]
    return options


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--write-layout"]:
        return write_layout_main(argv[1:], sys.stdin.read())
    if argv[:1] == ["--enter"]:
        return enter_main(argv[1:])
    return Agent(parse_args(argv), dict(os.environ)).run()


def write_layout_main(argv, text: str) -> int:
    """``--write-layout <root> <system disk>`` with the layout as JSON on stdin: write it and apply it at once. The
    console runs this as the instance's own account when it hot-plugs a disk or a mount, so the links are made with
    that account's rights alone, whatever the account made of its system disk."""
    root, system = Path(argv[0]), Path(argv[1])
    layout = json.loads(text)
    previous = read_layout(system)
    write_layout(system, layout)
    apply_layout(root, system, layout, previous=previous)
    return 0


NS_GET_PARENT = 0xB702  # ioctl: the parent of a user namespace
SANDBOX_NAMESPACES = ("ipc", "uts", "net", "pid", "mnt")


def enter_main(argv) -> int:
    """``--enter <pid> <program> [args…]``: run the program inside the bubblewrap sandbox whose first process is
    ``pid``, as the unprivileged account that started it (a shell in a Slurm job booted from an image).

    bwrap made the sandbox's namespaces in one user namespace and, with ``--disable-userns``, put its processes in a
    nested one. From inside the nested one nothing of its parent's may be entered, and from the host an unprivileged
    caller may enter a namespace only from inside its owner: so the parent user namespace first (the account owns
    it), then the sandbox's others, then the nested one, where the caller's uid is root without a way out. The root
    and the working folder are the sandbox's own (``chroot``, as ``nsenter --root``), and the program runs in a child,
    the first one that is in the sandbox's PID namespace; its exit status is this process's."""
    pid, program = int(argv[0]), argv[1:]
    try:
        _join_sandbox(pid)
    except OSError as exc:
        sys.stderr.write(f"agent: cannot enter the machine: {exc}\n")
        return 1
    child = os.fork()
    if child == 0:
        try:
            os.execv(program[0], program)
        finally:
            os._exit(127)
    _pid, status = os.waitpid(child, 0)
    return os.WEXITSTATUS(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status)


def _join_sandbox(pid: int) -> None:
    """This process into the namespaces and the root of the sandbox whose first process is ``pid`` (see
    :func:`enter_main` for the order)."""
    libc = ctypes.CDLL(None, use_errno=True)

    def setns(fd: int) -> None:
        if libc.setns(fd, 0) != 0:
            number = ctypes.get_errno()
            raise OSError(number, os.strerror(number))

    names = ("user", *SANDBOX_NAMESPACES)
    opened = {name: os.open(f"/proc/{pid}/ns/{name}", os.O_RDONLY | os.O_CLOEXEC) for name in names}
    root = os.open(f"/proc/{pid}/root", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    setns(fcntl.ioctl(opened["user"], NS_GET_PARENT))
    for name in SANDBOX_NAMESPACES:
        setns(opened[name])
    setns(opened["user"])
    os.fchdir(root)
    os.chroot(".")
    os.chdir("/")


if __name__ == "__main__":
    sys.exit(main())
