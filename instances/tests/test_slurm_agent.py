"""The instance agent: card mapping, the instance's directories, vendor metrics from recorded tool outputs, and the
checkpoint marker. Pure Python: no database, no cluster."""

import http.server
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from agent import gpucloud_agent as agent

RECORDED = Path(__file__).parent / "fixtures"
AGENT = Path(agent.__file__)


@pytest.mark.parametrize(
    ("job_gpus", "offset", "cards"),
    [
        ("16,17", 16, [0, 1]),
        ("8-11", 8, [0, 1, 2, 3]),
        ("0,1,2,3,4,5,6,7", 0, list(range(8))),
        ("", 0, []),
        ("0,1", 24, [0, 1]),
    ],
)
def test_slurm_global_gres_indexes_become_the_chips_own_card_numbers(job_gpus, offset, cards):
    assert agent.local_cards(job_gpus, offset) == cards


@pytest.mark.parametrize(
    ("family", "variable"),
    [("npu", "ASCEND_RT_VISIBLE_DEVICES"), ("mlu", "MLU_VISIBLE_DEVICES"), ("dcu", "HIP_VISIBLE_DEVICES")],
)
def test_each_vendor_sees_only_its_cards_and_not_slurms_global_cuda_numbers(family, variable):
    slurm_env = {"CUDA_VISIBLE_DEVICES": "16,17", "GPU_DEVICE_ORDINAL": "16,17", "PATH": "/usr/bin"}
    env = agent.vendor_environment(family, [0, 1], slurm_env)
    assert env[variable] == "0,1"
    assert "CUDA_VISIBLE_DEVICES" not in env and "GPU_DEVICE_ORDINAL" not in env
    assert env["PATH"] == "/usr/bin"


def test_nvidia_cards_are_renumbered_too():
    env = agent.vendor_environment("cuda", [2, 3], {"CUDA_VISIBLE_DEVICES": "2,3"})
    assert env["CUDA_VISIBLE_DEVICES"] == "2,3"


def test_npu_smi_reports_aicore_and_hbm_of_the_instances_npus():
    metrics = agent.card_metrics("npu", [1, 2], (RECORDED / "npu-smi-info.txt").read_text())
    assert metrics["source"] == "npu-smi"
    assert [c["index"] for c in metrics["cards"]] == [1, 2]
    assert metrics["card_utilisation"] == 90.0  # (87 + 93) / 2
    assert metrics["memory_used"] == 77.5  # 52428 and 49152 of 65536 MB of HBM


def test_cnmon_reports_util_and_memory_of_the_instances_mlus():
    metrics = agent.card_metrics("mlu", [0, 1], (RECORDED / "cnmon.txt").read_text())
    assert metrics["source"] == "cnmon"
    assert metrics["card_utilisation"] == 80.0 and metrics["memory_used"] == 74.6


def test_hy_smi_reports_dcu_and_vram_percentages():
    metrics = agent.card_metrics("dcu", [2, 3], (RECORDED / "hy-smi.txt").read_text())
    assert metrics["source"] == "hy-smi"
    assert metrics["card_utilisation"] == 0.0 and metrics["memory_used"] == 0.0
    assert agent.card_metrics("dcu", [0], (RECORDED / "hy-smi.txt").read_text())["card_utilisation"] == 91.0


def test_nvidia_smi_csv_query_is_parsed():
    metrics = agent.card_metrics("cuda", [0, 1], (RECORDED / "nvidia-smi-query.csv").read_text())
    assert metrics["card_utilisation"] == 96.0 and metrics["memory_used"] == 86.3


def test_garbage_from_a_vendor_tool_is_refused_so_the_agent_falls_back_to_the_host():
    with pytest.raises(ValueError):
        agent.card_metrics("mlu", [0], "cnmon: command failed\n")


def test_without_the_vendor_tool_host_cpu_and_memory_are_reported_labelled_host(tmp_path, monkeypatch):
    proc = tmp_path / "proc"
    proc.mkdir()
    (proc / "meminfo").write_text("MemTotal:       1000 kB\nMemFree:         100 kB\nMemAvailable:    250 kB\n")
    (proc / "stat").write_text("cpu  100 0 100 800 0 0 0 0 0 0\n")
    sampler = agent.HostSampler(proc)
    sampler.sample()
    (proc / "stat").write_text("cpu  150 0 150 900 0 0 0 0 0 0\n")  # 100 busy of 200 ticks
    monkeypatch.setattr(agent.shutil, "which", lambda name: None)
    metrics = agent.collect_metrics("mlu", [0, 1], sampler)
    assert metrics == {"source": "host", "card_utilisation": 50.0, "memory_used": 75.0, "cards": []}


def _cgroup(tmp_path, *, usage_usec: int, cpu_max: str, current: int, limit: str):
    proc, group = tmp_path / "proc", tmp_path / "cgroup" / "gpucloud" / "abc"
    (proc / "self").mkdir(parents=True, exist_ok=True)
    group.mkdir(parents=True, exist_ok=True)
    (proc / "self" / "cgroup").write_text("0::/gpucloud/abc\n")
    (proc / "meminfo").write_text("MemTotal:    8000000 kB\n")
    (group / "cpu.stat").write_text(f"usage_usec {usage_usec}\nuser_usec 0\nsystem_usec 0\n")
    (group / "cpu.max").write_text(f"{cpu_max}\n")
    (group / "memory.current").write_text(f"{current}\n")
    (group / "memory.max").write_text(f"{limit}\n")
    return proc, tmp_path / "cgroup"


def test_without_a_card_the_machines_own_cgroup_is_reported_against_its_own_limits(tmp_path, monkeypatch):
    proc, cgroups = _cgroup(tmp_path, usage_usec=0, cpu_max="50000 100000", current=512 << 20, limit=str(2 << 30))
    clock = iter([100.0, 110.0])
    monkeypatch.setattr(agent.shutil, "which", lambda name: None)
    machine = agent.CgroupSampler(proc, cgroups, clock=lambda: next(clock))
    agent.collect_metrics("cpu", [], agent.HostSampler(proc), machine)
    _cgroup(tmp_path, usage_usec=2_500_000, cpu_max="50000 100000", current=1 << 30, limit=str(2 << 30))

    metrics = agent.collect_metrics("cpu", [], agent.HostSampler(proc), machine)

    # 2.5 s of CPU in 10 s on half a CPU: half of the machine's share, whatever the host's other cores do.
    assert metrics == {"source": "cgroup", "card_utilisation": 50.0, "memory_used": 50.0, "cards": []}


def test_a_cgroup_without_limits_is_measured_against_the_hosts_cpus_and_memory(tmp_path, monkeypatch):
    proc, cgroups = _cgroup(tmp_path, usage_usec=0, cpu_max="max 100000", current=2_048_000_000, limit="max")
    monkeypatch.setattr(agent.os, "cpu_count", lambda: 4)
    clock = iter([0.0, 1.0])
    machine = agent.CgroupSampler(proc, cgroups, clock=lambda: next(clock))
    machine.sample()
    _cgroup(tmp_path, usage_usec=1_000_000, cpu_max="max 100000", current=2_048_000_000, limit="max")

    assert machine.sample() == {"source": "cgroup", "card_utilisation": 25.0, "memory_used": 25.0, "cards": []}


def test_on_cgroup_v1_the_memory_cpu_and_cpuacct_controllers_are_read(tmp_path, monkeypatch):
    proc, cgroups = tmp_path / "proc", tmp_path / "cgroup"
    (proc / "self").mkdir(parents=True)
    (proc / "self" / "cgroup").write_text(
        "5:memory:/gpucloud/abc\n2:cpuacct:/gpucloud/abc\n1:cpu:/gpucloud/abc\n0::/\n"
    )
    (proc / "meminfo").write_text("MemTotal:       4000 kB\n")
    for controller, files in {
        "memory": {"memory.usage_in_bytes": "1024000", "memory.limit_in_bytes": "9223372036854771712"},
        "cpu": {"cpu.cfs_quota_us": "100000", "cpu.cfs_period_us": "100000"},
        "cpuacct": {"cpuacct.usage": "0"},
    }.items():
        (cgroups / controller / "gpucloud" / "abc").mkdir(parents=True)
        for name, value in files.items():
            (cgroups / controller / "gpucloud" / "abc" / name).write_text(value + "\n")
    clock = iter([0.0, 2.0])
    machine = agent.CgroupSampler(proc, cgroups, clock=lambda: next(clock))
    machine.sample()
    (cgroups / "cpuacct" / "gpucloud" / "abc" / "cpuacct.usage").write_text("500000000\n")

    # Half a second in two on one CPU; no memory limit: the host's 4000 kB.
    assert machine.sample() == {"source": "cgroup", "card_utilisation": 25.0, "memory_used": 25.0, "cards": []}


def test_outside_a_machines_cgroup_the_host_is_reported(tmp_path):
    (tmp_path / "proc" / "self").mkdir(parents=True)
    (tmp_path / "proc" / "self" / "cgroup").write_text("4:memory:/user.slice\n0::/\n")

    assert not agent.CgroupSampler(tmp_path / "proc", tmp_path / "cgroup").available


def test_the_layout_links_storage_disks_and_read_only_hub_items_and_drops_stale_ones(tmp_path):
    root = tmp_path / "root"
    system = root / "instances" / "abc"
    hub = root / "hub" / "Qwen" / "Qwen2-7B"
    layout = {
        "disks": ["d1"],
        "mounts": [
            {"source": str(root / "shared" / "u1"), "target": "/root/shared", "read_only": False},
            {"source": str(hub), "target": "/root/public/Qwen/Qwen2-7B", "read_only": True},
        ],
    }
    made = agent.apply_layout(root, system, layout)
    home = system / "root"
    assert os.readlink(home / "shared") == str(root / "shared" / "u1")
    assert os.readlink(home / "data" / "d1") == str(root / "disks" / "d1") and (root / "disks" / "d1").is_dir()
    assert os.readlink(home / "public" / "Qwen" / "Qwen2-7B") == str(hub)
    assert home / "public" / "Qwen" in made  # new folders are reported, so the console can hand them over

    agent.apply_layout(root, system, {"disks": [], "mounts": layout["mounts"][:1]}, previous=layout)
    assert not (home / "data" / "d1").exists() and not (home / "public" / "Qwen" / "Qwen2-7B").is_symlink()
    assert (root / "disks" / "d1").is_dir()  # detaching never deletes the disk
    assert (home / "shared").is_symlink()


def test_a_disk_is_linked_at_the_folder_the_layout_names_and_a_bare_id_at_its_id(tmp_path):
    root = tmp_path / "root"
    system = root / "instances" / "abc"
    data = system / "root" / "data"
    before = {"disks": ["d1", "d2"], "mounts": []}  # a layout written before disks had folders of their own
    agent.apply_layout(root, system, before)
    assert sorted(os.listdir(data)) == ["d1", "d2"]

    # The console names the folders: d1 moves to its name, d2 stays at its id; what is malformed is dropped
    layout = {
        "disks": [
            {"id": "d1", "folder": "实验 数据"},
            "d2",
            {"id": "../d3", "folder": "escape"},
            {"id": "d4", "folder": "../../etc"},
            {"id": "d5", "folder": "."},
            {"id": "d6"},
            {"folder": "d7"},
            "d" * 256,  # longer than a folder's name may be: the machine would not start
            {"id": "d8", "folder": "数" * 86},
        ],
        "mounts": [],
    }
    assert agent.clean_layout(layout)["disks"] == [{"id": "d1", "folder": "实验 数据"}, "d2"]
    agent.apply_layout(root, system, layout, previous=before)
    assert {link.name: os.readlink(link) for link in data.iterdir()} == {
        "实验 数据": str(root / "disks" / "d1"),
        "d2": str(root / "disks" / "d2"),
    }
    assert sorted(os.listdir(root / "disks")) == ["d1", "d2"]

    # Gone from the layout: its link goes, under its folder
    agent.apply_layout(root, system, {"disks": ["d2"], "mounts": []}, previous=layout)
    assert os.listdir(data) == ["d2"]


def _run_agent(tmp_path, workload, env_extra=None):
    env = {"PATH": os.environ["PATH"], "SLURM_JOB_ID": "42", "SLURM_JOB_GPUS": "16,17"} | (env_extra or {})
    command = [
        sys.executable,
        str(AGENT),
        "--instance",
        "abc",
        "--root",
        str(tmp_path),
        "--family",
        "mlu",
        "--offset",
        "16",
        "--interval",
        "60",
        "--grace",
        "5",
        "--",
        *workload,
    ]
    return subprocess.Popen(command, env=env)


def _wait(predicate, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    raise AssertionError("timed out")


def test_the_agent_passes_usr1_to_the_workload_after_writing_the_marker_and_stops_on_term(tmp_path):
    # Given a workload that records its environment and every USR1 it gets
    script = 'env > "$HOME/env.txt"; trap "echo usr1 >> $HOME/signals" USR1; while true; do sleep 0.1 & wait $!; done'
    process = _run_agent(tmp_path, ["bash", "-c", script])
    home = tmp_path / "instances" / "abc" / "root"
    _wait(lambda: (home / "env.txt").exists() and (home / "env.txt").read_text().count("\n") > 3)
    env = dict(line.split("=", 1) for line in (home / "env.txt").read_text().splitlines() if "=" in line)
    assert env["MLU_VISIBLE_DEVICES"] == "0,1" and "CUDA_VISIBLE_DEVICES" not in env

    # When the console sends the checkpoint signal
    process.send_signal(signal.SIGUSR1)

    # Then the marker is written and the workload got the signal; the instance keeps running
    _wait(lambda: (home / "signals").exists())
    marker = json.loads((home / agent.MARKER).read_text())
    assert marker["signal"] == "SIGUSR1" and marker["job_id"] == "42"
    assert process.poll() is None

    # And SIGTERM (cancel, preemption) ends the workload and the agent
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=10) == 143  # the workload ended by SIGTERM
    assert json.loads((home / agent.MARKER).read_text())["signal"] == "SIGTERM"


def test_a_workload_that_ignores_term_is_killed_after_the_grace(tmp_path):
    process = _run_agent(tmp_path, ["bash", "-c", "trap '' TERM; while true; do sleep 0.1; done"])
    _wait(lambda: (tmp_path / "instances" / "abc" / "root").exists())
    time.sleep(0.3)
    started = time.monotonic()
    process.send_signal(signal.SIGTERM)
    process.wait(timeout=15)
    assert 4.5 < time.monotonic() - started < 10


def test_the_workloads_environment_is_written_for_shells_readable_by_the_jobs_user_only(tmp_path):
    env = {
        "HF_TOKEN": 'it\'s a "secret"\nwith a line',
        "EPOCHS": "3",
        "SLURM_JOB_ID": "42",
        "PWD": "/tmp",
        "BASH_FUNC_f%%": "() { :; }",
        "MLU_VISIBLE_DEVICES": "0,1",
    }
    path = agent.write_environment(tmp_path, env)
    assert path == tmp_path / agent.ENVIRONMENT and path.stat().st_mode & 0o777 == 0o600

    # Sourced by a shell that has Slurm's step variables, it gives the workload's values and unsets the global cards
    step = {"PATH": "/usr/bin:/bin", "CUDA_VISIBLE_DEVICES": "16,17", "SLURM_JOB_ID": "42", "SLURM_STEP_ID": "3"}
    shown = subprocess.run(["/bin/sh", "-c", f". {path} && env"], env=step, capture_output=True, text=True, check=True)
    assert f"HF_TOKEN={env['HF_TOKEN']}\n" in shown.stdout and "EPOCHS=3\n" in shown.stdout
    assert "CUDA_VISIBLE_DEVICES" not in shown.stdout and "MLU_VISIBLE_DEVICES=0,1\n" in shown.stdout
    assert "SLURM_STEP_ID=3\n" in shown.stdout  # the shell's own step, not the batch step's


FAKE_LAB = """\
import http.server, os, signal, sys
port = int(next(a for a in sys.argv if a.startswith("--ServerApp.port=")).split("=")[1])
ignored = signal.getsignal(signal.SIGUSR1) == signal.SIG_IGN
open(os.path.join(os.path.dirname(sys.argv[0]), "lab.pid"), "w").write(f"{os.getpid()} {os.getsid(0)} {ignored}")
class Status(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        ok = self.headers.get("Authorization") == "token " + os.environ["JUPYTER_TOKEN"]
        self.send_response(200 if ok else 403)
        self.end_headers()
http.server.HTTPServer(("127.0.0.1", port), Status).serve_forever()
"""


class Console(http.server.BaseHTTPRequestHandler):
    """The console's report endpoint, recording what the agent sends."""

    reports: list = []

    def do_POST(self):
        Console.reports.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b'{"wanted": "running"}')

    def log_message(self, *args):
        pass


def test_jupyterlab_runs_beside_the_workload_is_reported_once_it_answers_and_ends_with_the_agent(tmp_path):
    # Given a JupyterLab stand-in (a "jupyter" script answering its status with the token) and a console
    lab = tmp_path / "bin" / "jupyter"
    lab.parent.mkdir()
    lab.write_text(f"#!{sys.executable}\n{FAKE_LAB}")
    lab.chmod(0o755)
    Console.reports = []
    console = http.server.HTTPServer(("127.0.0.1", 0), Console)
    threading.Thread(target=console.serve_forever, daemon=True).start()

    # When the agent runs a short workload with it
    env = {"GPUCLOUD_AGENT_TOKEN": "gca_x", "JUPYTER_TOKEN": "lab-secret", "SLURMD_NODENAME": "localhost"}
    command = [
        sys.executable,
        str(AGENT),
        "--instance",
        "abc",
        "--root",
        str(tmp_path),
        "--family",
        "cpu",
        "--console",
        f"http://127.0.0.1:{console.server_port}",
        "--interval",
        "60",
        "--jupyter",
        str(lab),
        "--",
        "sleep",
        "3",
    ]
    process = subprocess.Popen(command, env={"PATH": os.environ["PATH"], **env})
    try:
        assert process.wait(timeout=30) == 0
    finally:
        console.shutdown()

    # Then the first report came once the lab answered, with its address on the node's own address
    first = Console.reports[0]
    assert first["event"] == "started" and first["jupyter"]["url"].startswith("http://127.0.0.1:")
    assert Console.reports[-1]["event"] == "exited"
    # and the lab ran in a session of its own, deaf to the checkpoint signal, and ended with the agent
    pid, session, ignored = (tmp_path / "bin" / "lab.pid").read_text().split()
    assert session == pid and ignored == "True"
    assert not Path(f"/proc/{pid}").exists()
    # and a shell in the job finds the workload's environment, the lab's token in it, the agent's not
    environment = (tmp_path / "instances" / "abc" / agent.ENVIRONMENT).read_text()
    assert "export JUPYTER_TOKEN=lab-secret" in environment and "GPUCLOUD_AGENT_TOKEN" not in environment


def test_entering_a_machine_that_is_not_there_says_so_and_fails():
    # A pid no process has (above the kernel's pid_max): nothing to enter, and the command never runs
    done = subprocess.run(
        [sys.executable, "-I", str(AGENT), "--enter", "4194305", "/bin/echo", "ran"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 1 and done.stdout == ""
    assert "agent: cannot enter the machine" in done.stderr
