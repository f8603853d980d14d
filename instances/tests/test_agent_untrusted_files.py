"""The agent trusts nothing the machine can write: links, FIFOs and oversized files on the system disk.

On the local backend the agent runs outside the sandbox as the machine's host user, so a link the workload leaves
where the agent reads or writes resolves against the host's files; a FIFO blocks whoever opens it. What the owner
(and the operator) would notice: host files showing up in the training chart, host files written on stop, or
heartbeats that stop coming. The same agent file runs in Slurm jobs.
"""

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

AGENT = Path(agent.__file__)
HOST_SCALARS = '{"tag": "host-secret", "step": 1, "value": 42}\n'


@pytest.fixture
def machine(tmp_path):
    """An instance root with one system disk, and a folder of the host's beside it that the machine must not reach."""
    system = tmp_path / "instances" / "abc"
    (system / "root" / ".gpucloud").mkdir(parents=True)
    host = tmp_path / "host"
    host.mkdir()
    (host / "secret.jsonl").write_text(HOST_SCALARS)
    return system, host


def within(seconds: float, call):
    """``call()``'s result, or a failure if it has not returned after ``seconds`` (it blocked)."""
    result = {}
    thread = threading.Thread(target=lambda: result.setdefault("value", call()), daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), "blocked"
    return result["value"]


def test_a_link_at_the_scalars_file_or_its_folder_charts_nothing_of_the_host(machine):
    system, host = machine
    home = system / "root"
    (home / agent.SCALARS_FILE).symlink_to(host / "secret.jsonl")
    assert agent.ScalarTail(home / agent.SCALARS_FILE).read() == []

    tail = agent.ScalarTail(home / agent.SCALARS_FILE, home=home)  # as the agent reads it: from the home down
    (home / agent.SCALARS_FILE).unlink()
    (home / ".gpucloud").rmdir()
    (home / ".gpucloud").symlink_to(host)
    (host / "scalars.jsonl").write_text(HOST_SCALARS)
    assert tail.read() == []

    # The workload's own file is read as before
    (home / ".gpucloud").unlink()
    (home / ".gpucloud").mkdir()
    (home / agent.SCALARS_FILE).write_text('{"tag": "loss", "step": 1, "value": 0.5}\n')
    assert [s["tag"] for s in tail.read()] == ["loss"]


def test_a_fifo_at_the_scalars_file_does_not_block_and_an_endless_line_is_skipped(machine):
    system, _host = machine
    home = system / "root"
    os.mkfifo(home / agent.SCALARS_FILE)
    tail = agent.ScalarTail(home / agent.SCALARS_FILE)
    assert within(5, tail.read) == []

    os.unlink(home / agent.SCALARS_FILE)
    with open(home / agent.SCALARS_FILE, "wb") as f:
        f.write(b"x" * (3 * agent.MAX_SCALAR_BYTES))  # no line end: never held whole
    assert tail.read() == [] and tail.offset == agent.MAX_SCALAR_BYTES
    with open(home / agent.SCALARS_FILE, "ab") as f:
        f.write(b'x\n{"tag": "loss", "step": 7, "value": 0.1}\n')
    assert tail.read() == [] and tail.read() == []  # the rest of the endless line is skipped…
    assert [s["step"] for s in tail.read()] == [7]  # …and the next line is read


@pytest.mark.parametrize("planted", ["checkpoint.json", "checkpoint.tmp", "folder"])
def test_a_link_at_the_checkpoint_marker_never_writes_a_host_file(machine, planted):
    system, host = machine
    folder = system / "root" / ".gpucloud"
    if planted == "folder":
        folder.rmdir()
        folder.symlink_to(host)
    else:
        (folder / planted).symlink_to(host / "written")

    try:
        agent.write_marker(system, signal_name="SIGUSR1", job_id="42", restart=0)
    except OSError:
        assert planted == "folder"  # nothing to write in: the signal is still passed on (Agent.on_signal)
    else:
        marker = system / "root" / agent.MARKER
        assert not marker.is_symlink() and json.loads(marker.read_text())["signal"] == "SIGUSR1"
    assert sorted(p.name for p in host.iterdir()) == ["secret.jsonl"]


def test_a_fifo_at_the_checkpoint_marker_is_replaced_without_blocking(machine):
    system, _host = machine
    os.mkfifo(system / "root" / agent.MARKER)
    within(5, lambda: agent.write_marker(system, signal_name="SIGTERM", job_id="42", restart=1))
    assert json.loads((system / "root" / agent.MARKER).read_text())["restart_count"] == 1


def test_the_layout_and_environment_follow_no_link_the_workload_made(machine, tmp_path):
    system, host = machine
    root = tmp_path
    # A link where the data disks' folder goes: the disk's link is not made in the host's folder
    (system / "root" / "data").symlink_to(host)
    layout = {"disks": ["d1", "../../escape"], "mounts": [{"target": 5}]}
    agent.apply_layout(root, system, layout)
    assert sorted(p.name for p in host.iterdir()) == ["secret.jsonl"]
    assert not (root / "escape").exists()

    # The layout file and the environment live on the system disk too: a linked .gpucloud is not written through
    (system / ".gpucloud").symlink_to(host)
    with pytest.raises(OSError):
        agent.write_environment(system, {"HF_TOKEN": "secret"})
    with pytest.raises(OSError):
        agent.write_layout(system, layout)
    (host / "layout.json").write_text(json.dumps({"disks": ["from-the-host"]}))
    assert agent.read_layout(system) == {}
    assert sorted(p.name for p in host.iterdir()) == ["layout.json", "secret.jsonl"]


class Console(http.server.BaseHTTPRequestHandler):
    """The console's report endpoint, recording each report's event and scalars."""

    reports: list = []

    def do_POST(self):
        Console.reports.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *args):
        pass


def test_with_a_fifo_at_the_scalars_and_the_marker_heartbeats_go_on_and_a_stop_completes(tmp_path):
    # Given a workload that plants FIFOs where the agent reads the scalars and writes the marker
    Console.reports = []
    console = http.server.HTTPServer(("127.0.0.1", 0), Console)
    threading.Thread(target=console.serve_forever, daemon=True).start()
    plant = (
        "mkfifo $HOME/.gpucloud/scalars.jsonl $HOME/.gpucloud/checkpoint.json $HOME/.gpucloud/checkpoint.tmp;"
        " touch $HOME/planted; while true; do sleep 0.1; done"
    )
    console_url = f"http://127.0.0.1:{console.server_port}"
    options = ["--instance", "abc", "--root", str(tmp_path), "--family", "cpu", "--console", console_url]
    command = [sys.executable, str(AGENT), *options, "--interval", "0.2", "--grace", "2", "--", "bash", "-c", plant]
    process = subprocess.Popen(command, env={"PATH": os.environ["PATH"], "GPUCLOUD_AGENT_TOKEN": "gca_x"})
    try:
        home = tmp_path / "instances" / "abc" / "root"
        deadline = time.monotonic() + 20
        while not (home / "planted").exists():
            assert time.monotonic() < deadline and process.poll() is None
            time.sleep(0.05)
        # Then heartbeats keep coming
        seen = len(Console.reports)
        time.sleep(2)
        assert len(Console.reports) >= seen + 4
        # And a stop writes the marker in the FIFO's place and ends the agent
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=15)
    finally:
        if process.poll() is None:
            process.kill()
        console.shutdown()
    assert json.loads((home / agent.MARKER).read_text())["signal"] == "SIGTERM"
    assert Console.reports[-1]["event"] == "exited"
