"""The instance agent: the program a Slurm job runs for an instance (``python3 agent/gpucloud_agent.py …``).

It is standard-library only, so any Python 3.11 on a node runs it without the console's virtualenv. It

* maps the cards Slurm allocated (``SLURM_JOB_GPUS``: global GRES indexes) to the vendor's visibility variable
  (``ASCEND_RT_VISIBLE_DEVICES``, ``MLU_VISIBLE_DEVICES``, ``HIP_VISIBLE_DEVICES``, ``CUDA_VISIBLE_DEVICES``),
  counting from the first card of the chip's type on the node (``--offset``);
* lays out the instance's directories under the instance root: the system disk (the instance's ``/``), data disks
  under ``/root/data/<disk>``, the user's cloud storage at ``/root/shared`` and read-only hub items at
  ``/root/public/<repo>``, as symlinks (a mount is metadata, never a copy);
* starts the user's workload and, on SIGUSR1 (the console's checkpoint signal) or SIGTERM (stop, preemption),
  writes a checkpoint marker and passes the signal on; after SIGTERM it gives the workload ``--grace`` seconds;
* reports a heartbeat with metrics to the console every ``--interval`` seconds, authenticated by the instance's
  own token (``GPUCLOUD_AGENT_TOKEN`` in the environment, never on the command line). Metrics come from the
  vendor's tool when it is installed (npu-smi, cnmon, hy-smi, nvidia-smi); otherwise from the host's CPU and
  memory, labelled ``host``.
"""

import argparse
import json
import math
import os
import re
import shutil
import signal
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


# Directories ---------------------------------------------------------------------------------------------------


def read_layout(system: Path) -> dict:
    try:
        return json.loads((system / LAYOUT).read_text())
    except (OSError, ValueError):
        return {}


def write_layout(system: Path, layout: dict) -> None:
    path = system / LAYOUT
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(layout, indent=1, sort_keys=True))
    tmp.replace(path)


def _link(link: Path, target: str) -> list[Path]:
    made = []
    for folder in reversed(link.parents):
        if not folder.exists():
            folder.mkdir()
            made.append(folder)
    if link.is_symlink() and os.readlink(link) == target:
        return made
    if link.is_symlink() or link.is_file():
        link.unlink()
    elif link.exists():
        return made  # a real directory the user made there: never clobber data
    link.symlink_to(target)
    return [*made, link]


def layout_paths(root: Path, system: Path, layout: dict) -> dict[Path, str]:
    """Where each link of ``layout`` goes on the system disk, and what it points at."""
    links = {system / "root" / "data" / disk: str(root / "disks" / disk) for disk in layout.get("disks", [])}
    links |= {system / m["target"].lstrip("/"): m["source"] for m in layout.get("mounts", [])}
    return links


def apply_layout(root: Path, system: Path, layout: dict, previous: dict | None = None) -> list[Path]:
    """Make the instance's view match ``layout``: a link per data disk (``/root/data/<disk>``, the disk created
    when missing) and per mount (the user's storage, hub items); links of ``previous`` that are gone go.
    Returns the paths it made, so a caller running as another user can hand them to the jobs' user."""
    made = []
    home = system / "root"
    if not home.exists():
        home.mkdir(parents=True)
        made.append(home)
    links = layout_paths(root, system, layout)
    for disk in layout.get("disks", []):
        target = root / "disks" / disk
        if not target.exists():
            target.mkdir(parents=True)
            made.append(target)
    for link, target in links.items():
        made += _link(link, target)
    for link in set(layout_paths(root, system, previous or {})) - set(links):
        if link.is_symlink():
            link.unlink()
    return made


def write_marker(system: Path, *, signal_name: str, job_id: str, restart: int) -> dict:
    marker = {
        "signal": signal_name,
        "at": datetime.now(UTC).isoformat(),
        "job_id": job_id,
        "restart_count": restart,
    }
    path = system / "root" / MARKER
    if not path.parent.parent.is_dir():
        return marker  # the system disk is gone (released): nothing to write on
    path.parent.mkdir(exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(marker))
    tmp.replace(path)
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


def collect_metrics(family: str, cards: list[int], host: HostSampler) -> dict:
    tool = shutil.which(VENDOR_TOOLS.get(family, ""))
    if tool:
        try:
            result = subprocess.run([tool, *TOOL_ARGUMENTS[family]], capture_output=True, text=True, timeout=10)
            return card_metrics(family, cards, result.stdout)
        except (OSError, subprocess.SubprocessError, ValueError):
            pass  # a broken tool must not stop the heartbeat: fall back to the host's figures
    return host.sample()


# Training scalars ---------------------------------------------------------------------------------------------

SCALARS_FILE = ".gpucloud/scalars.jsonl"
MAX_SCALARS_PER_REPORT = 500


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
    """The new complete lines of the workload's scalars file since the last report (a partial last line waits)."""

    def __init__(self, path: Path):
        self.path = path
        self.offset = 0
        self.inode = None

    def read(self, limit: int = MAX_SCALARS_PER_REPORT) -> list[dict]:
        try:
            with self.path.open("rb") as f:
                stat = os.fstat(f.fileno())
                if stat.st_size < self.offset or stat.st_ino != self.inode:
                    self.offset = 0  # the workload truncated or replaced the file: it is all new
                self.inode = stat.st_ino
                f.seek(self.offset)
                scalars = []
                while len(scalars) < limit:
                    line = f.readline()
                    if not line.endswith(b"\n"):
                        break  # end of file, or a line still being written
                    self.offset += len(line)
                    scalar = parse_scalar(line.decode("utf-8", "replace"))
                    if scalar is not None:
                        scalars.append(scalar)
                return scalars
        except OSError:
            return []


# The agent -----------------------------------------------------------------------------------------------------


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
        self.workload: subprocess.Popen | None = None
        self.stopping_since: float | None = None
        self.checkpoint: dict | None = None
        self.layout: dict = {}
        self.scalars = ScalarTail(self.system / "root" / SCALARS_FILE)
        self.unsent: list[dict] = []  # scalars of a report that failed: sent with the next one

    def lay_out(self) -> None:
        os.umask(0o002)  # the console's user shares the group: it hot-plugs links and deletes the system disk
        self.system.mkdir(parents=True, exist_ok=True)
        # The console writes the layout (``backends.slurm``: disks, /root/shared, hub items); the agent applies it
        # at start and on every heartbeat, so hot-plugged disks and mounts appear on whichever node runs it.
        self.layout = read_layout(self.system)
        apply_layout(self.root, self.system, self.layout)

    def start_workload(self) -> None:
        env = vendor_environment(self.options.family, self.cards, self.environ)
        env["HOME"] = str(self.system / "root")
        env["GPUCLOUD_INSTANCE"] = self.options.instance
        env["GPUCLOUD_CHECKPOINT_MARKER"] = str(self.system / "root" / MARKER)
        env["GPUCLOUD_SCALARS"] = str(self.scalars.path)  # JSON lines: the training curves on the instance page
        self.scalars.path.parent.mkdir(parents=True, exist_ok=True)
        env.pop("GPUCLOUD_AGENT_TOKEN", None)  # the workload never sees the agent's credential
        command = self.options.workload or ["sleep", "infinity"]
        self.workload = subprocess.Popen(command, env=env, cwd=self.system / "root", start_new_session=True)

    def on_signal(self, signum, _frame) -> None:
        name = signal.Signals(signum).name
        self.checkpoint = write_marker(self.system, signal_name=name, job_id=self.job_id, restart=self.restart)
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

    def report(self, event: str) -> None:
        if not (self.options.console and self.token):
            return
        body = {
            "event": event,
            "job_id": self.job_id,
            "restart_count": self.restart,
            "cards": self.cards,
            "metrics": collect_metrics(self.options.family, self.cards, self.host),
            "checkpoint": self.checkpoint,
            "scalars": self.unsent + self.scalars.read(MAX_SCALARS_PER_REPORT - len(self.unsent)),
        }
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
        signal.signal(signal.SIGUSR1, self.on_signal)
        signal.signal(signal.SIGTERM, self.on_signal)
        self.start_workload()
        self.report("started")
        next_report = time.monotonic() + self.options.interval
        while True:
            code = self.workload.poll()
            if code is not None:
                self.report("exited")
                return 128 - code if code < 0 else code  # killed by signal N: the shell's 128 + N
            now = time.monotonic()
            if self.stopping_since is not None and now - self.stopping_since > self.options.grace:
                self._forward(signal.SIGKILL)
            if now >= next_report and self.stopping_since is None:
                layout = read_layout(self.system)
                apply_layout(self.root, self.system, layout, previous=self.layout)
                self.layout = layout
                self.report("heartbeat")
                next_report = now + self.options.interval
            time.sleep(0.1)


def parse_args(argv):
    parser = argparse.ArgumentParser(description="The GPU cloud's instance agent (run by the instance's job).")
    parser.add_argument("--instance", required=True, help="the instance's public id")
    parser.add_argument("--root", required=True, help="the instance root on the node (shared by the zone)")
    parser.add_argument("--family", required=True, choices=[*sorted(VISIBILITY_VARIABLES), "cpu"])
    parser.add_argument("--offset", type=int, default=0, help="the node's first GRES index of this chip type")
    parser.add_argument("--console", default="", help="the console's base URL for reports")
    parser.add_argument("--interval", type=float, default=15.0, help="seconds between heartbeats")
    parser.add_argument("--grace", type=float, default=20.0, help="seconds the workload gets after SIGTERM")
    parser.add_argument("workload", nargs=argparse.REMAINDER, help="-- the command to run (default: sleep)")
    options = parser.parse_args(argv)
    if options.workload and options.workload[0] == "--":
        options.workload = options.workload[1:]
    return options


def main(argv=None) -> int:
    return Agent(parse_args(sys.argv[1:] if argv is None else argv), dict(os.environ)).run()


if __name__ == "__main__":
    sys.exit(main())
