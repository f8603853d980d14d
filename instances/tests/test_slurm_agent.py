"""The instance agent: card mapping, the instance's directories, vendor metrics from recorded tool outputs, and the
checkpoint marker. Pure Python: no database, no cluster."""

import json
import os
import signal
import subprocess
import sys
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
    ],  # fmt: skip
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


def _run_agent(tmp_path, workload, env_extra=None):
    env = {"PATH": os.environ["PATH"], "SLURM_JOB_ID": "42", "SLURM_JOB_GPUS": "16,17"} | (env_extra or {})
    command = [sys.executable, str(AGENT), "--instance", "abc", "--root", str(tmp_path), "--family", "mlu",
               "--offset", "16", "--interval", "60", "--grace", "5", "--", *workload]  # fmt: skip
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
