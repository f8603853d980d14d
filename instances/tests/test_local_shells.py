"""Every shell of a real machine of the local backend is the same machine: JupyterLab's terminal, an SSH session
(a command or a login shell) and the start command find the same Python and pip (the runtime's, with numpy) first
in PATH."""

import json
import time

import httpx
import pytest
from websockets.sync.client import unix_connect

from instances import runtime
from instances.backends import get_backend
from instances.models import Instance
from instances.tests.ssh_fixtures import ssh

pytestmark = [pytest.mark.sandbox, pytest.mark.django_db(transaction=True)]

DONE = "end-of-run"
# What a user types to see which Python they have. The output's markers are split by quotes in the typed line, so
# a terminal's echo of that line is never taken for them.
WHICH_PYTHON = (
    "echo BEGIN''; which python3 pip; python3 -c 'import numpy; print(\"numpy\", numpy.__version__)'; "
    f"echo {DONE[:3]}''{DONE[3:]}"
)


def fresh(instance):
    return Instance.objects.with_related().get(pk=instance.pk)


def in_lab_terminal(instance, line: str, timeout: float = 30) -> str:
    """``line`` typed into a new terminal of the machine's JupyterLab (as its Terminal tile opens one); what the
    terminal shows between the markers."""
    server = get_backend("local").jupyter(instance)
    headers = {"Authorization": f"token {server.token}"}
    lab = httpx.Client(transport=httpx.HTTPTransport(uds=server.socket), headers=headers, timeout=30)
    name = lab.post(f"http://localhost{server.base_path}api/terminals").json()["name"]
    shown = ""
    uri = f"ws://localhost{server.base_path}terminals/websocket/{name}"
    with unix_connect(server.socket, uri, additional_headers=headers, open_timeout=10) as terminal:
        terminal.send(json.dumps(["stdin", line + "\r"]))
        deadline = time.monotonic() + timeout
        while DONE not in shown:
            assert time.monotonic() < deadline, f"the terminal did not finish: {shown!r}"
            kind, *data = json.loads(terminal.recv(timeout=timeout))
            if kind == "stdout":
                shown += data[0]
    lab.delete(f"http://localhost{server.base_path}api/terminals/{name}")
    return between_markers(shown)


def between_markers(output: str) -> str:
    return output.replace("\r", "").split("BEGIN\n", 1)[-1].split(DONE, 1)[0]


def expected(runtime_bin: str) -> str:
    numpy = next(line for line in runtime.REQUIREMENTS.read_text().splitlines() if line.startswith("numpy=="))
    return f"{runtime_bin}/python3\n{runtime_bin}/pip\nnumpy {numpy.split('==')[1]}\n"


def test_jupyterlabs_terminal_has_the_runtimes_python_and_pip_first(on_local, running):
    instance = running()
    assert in_lab_terminal(instance, WHICH_PYTHON) == expected(f"{runtime.path()}/bin")


def test_ssh_sessions_and_the_start_command_have_the_runtimes_python_and_pip_first(
    on_local, running, gateway, owner_key
):
    instance = running(start_command=WHICH_PYTHON)
    want = expected(f"{runtime.path()}/bin")
    # The start command, in the machine's log.
    backend = get_backend("local")
    on_local.settle(until=lambda: DONE in backend.logs(fresh(instance)), timeout=30, message="the start command")
    assert between_markers(backend.logs(fresh(instance))) == want
    # A command over SSH, and a login shell on a terminal.
    command = ssh(gateway.port, owner_key, instance.public_id, WHICH_PYTHON)
    assert between_markers(command.stdout.decode()) == want, command.stderr
    login = ssh(gateway.port, owner_key, instance.public_id, "-tt", input=f"{WHICH_PYTHON}\nexit\n".encode())
    assert between_markers(login.stdout.decode()) == want
    # A login shell that builds its environment afresh (as su - or an editor's remote server does).
    afresh = ssh(gateway.port, owner_key, instance.public_id, f"env -i /bin/bash -lc {json.dumps(WHICH_PYTHON)}")
    assert between_markers(afresh.stdout.decode()) == want, afresh.stderr


def test_a_running_machine_keeps_its_python_over_ssh_after_the_runtime_is_upgraded(
    on_local, running, gateway, owner_key, monkeypatch
):
    instance = running()
    started_with = f"{runtime.path()}/bin"
    # The console is upgraded: a new runtime (new requirements) for the machines started from now on.
    monkeypatch.setattr(runtime, "requirements_hash", lambda: "upgraded0000")
    command = ssh(gateway.port, owner_key, instance.public_id, WHICH_PYTHON)
    assert between_markers(command.stdout.decode()) == expected(started_with), command.stderr


def test_a_run_started_over_ssh_has_jupyters_variables_and_draws_its_training_curve(
    on_local, running, gateway, owner_key
):
    instance = running(start_command="echo no training at boot")
    platform = "echo BEGIN''; env | grep -E '^(GPUCLOUD|QUICKSTART)_' | sort; echo end''-of-run"
    over_ssh = between_markers(ssh(gateway.port, owner_key, instance.public_id, platform).stdout.decode())
    assert "GPUCLOUD_SCALARS=/root/" in over_ssh and over_ssh == in_lab_terminal(instance, platform)

    # The quick-start script run by hand over SSH: its curve reaches the instance's page.
    train = "python /opt/gpucloud/workloads/quickstart_train.py --steps 3 --interval 0.1 --checkpoint /tmp/q.json"
    assert ssh(gateway.port, owner_key, instance.public_id, train).returncode == 0

    def curve():
        return get_backend("local").training_curves(fresh(instance)).get("loss", [])

    on_local.settle(until=lambda: len(curve()) == 3, timeout=30, message="the curve of the run over SSH")
    assert [step for step, _value in curve()] == [1, 2, 3]
