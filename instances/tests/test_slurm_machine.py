"""Getting into a Slurm instance on the real local cluster (``scripts/slurm-local.sh start``): JupyterLab runs in the
job and answers through the console's proxy for the owner only, a shell is srun into the job with the instance's
home and environment, and a stop takes JupyterLab down with the job.

JupyterLab comes from the local backend's runtime (``manage.py use_local --check`` builds it; CI does)."""

import json
import os
import pty
import select
import subprocess
import time

import httpx
import pytest
from django.db import transaction

from instances import lifecycle, runtime, secrets
from instances.backends import get_backend
from instances.choices import Status
from instances.models import Instance
from instances.tests.ssh_fixtures import ssh
from instances.tests.test_jupyter_proxy_real import _execute_request, _printed
from marketplace.hub import repos as hub_repos
from marketplace.hub import services as hub_services
from storage import mounts
from tests.asgi_server import browser, lab_browser, open_websocket

pytestmark = [
    pytest.mark.slurm,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not runtime.is_ready(), reason="no JupyterLab runtime: run manage.py use_local --check"),
]


def fresh(instance):
    return Instance.objects.with_related().get(pk=instance.pk)


@pytest.fixture
def slurm_instance(on_slurm, launch, hf_token):
    """A running MLU370 instance on the cluster, with a variable and a secret."""
    instance = launch(chip="mlu370-x8", cards=2, image="pytorch-2.2-neuware", env={"EPOCHS": "3"}, secrets=[hf_token])
    on_slurm.settle()
    instance = fresh(instance)
    assert instance.status == Status.RUNNING, instance.status_detail
    return instance


@pytest.fixture
def hf_token(owner):

    secrets.put_secret(owner, "HF_TOKEN", "hf_secret_value")
    return "HF_TOKEN"


def enter(instance, command, timeout=60):
    argv = get_backend("slurm").enter_argv(instance, command)
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)


def test_a_slurm_instances_jupyterlab_answers_through_the_console_for_its_owner_only_and_goes_with_a_stop(
    on_slurm, slurm_instance, console_server, owner, stranger
):
    # Given a running instance: the page offers JupyterLab, which listens on the job's node
    instance = slurm_instance
    assert instance.access["jupyter"] is True and instance.access["node"] == "localhost"
    server = get_backend("slurm").jupyter(instance)
    assert server is not None and server.url.startswith("http://127.0.0.1:")
    page = browser(console_server, owner).get(instance.get_absolute_url())
    assert 'id="open-jupyterlab"' in page.text and 'id="terminal-hint"' in page.text

    # When the owner opens it through the console, it answers without showing its token
    base = server.base_path
    client = lab_browser(console_server, owner, instance.public_id)
    lab = client.get(f"{base}lab")
    assert lab.status_code == 200 and "jupyter-config-data" in lab.text and server.token not in lab.text
    # and a kernel on the node runs code, as the owner's own account, in the instance's home
    created = client.post(
        f"{base}api/kernels", json={"name": "python3"}, headers={"Origin": f"http://{client.headers['host']}"}
    )
    assert created.status_code == 201, created.text
    channels = f"{base}api/kernels/{created.json()['id']}/channels?session_id=s1"
    with open_websocket(console_server, channels, lab=client) as ws:
        ws.send(json.dumps(_execute_request("import os, getpass; print(getpass.getuser(), os.getcwd())")))
        assert _printed(ws) == f"gpctest-u{owner.pk} {on_slurm.system_disk(instance) / 'root'}\n"

    # A stranger gets the 404 of a missing instance; nobody signed in gets further than the sign-in page
    assert browser(console_server, stranger).get(f"{base}lab").status_code == 404
    signed_out = browser(console_server).get(f"{base}lab")
    assert signed_out.status_code == 302 and "/accounts/login/" in signed_out.headers["location"]

    # When the owner stops the instance, JupyterLab is gone with the job
    lifecycle.stop(fresh(instance))
    on_slurm.settle()
    assert fresh(instance).status == Status.STOPPED
    assert get_backend("slurm").jupyter(fresh(instance)) is None
    assert browser(console_server, owner).get(f"{base}lab").status_code == 503
    assert client.get(f"{base}lab").status_code == 503
    with pytest.raises(httpx.TransportError):
        httpx.get(f"{server.url}{base}api/status", timeout=5)


def test_a_shell_runs_in_the_job_as_its_owners_account_in_its_home_with_its_environment(
    on_slurm, slurm_instance, monkeypatch, owner
):
    instance = slurm_instance
    monkeypatch.setenv("CONSOLE_ONLY", "the console's own variable")

    done = enter(instance, "echo $((6*7))")
    assert (done.returncode, done.stdout, done.stderr) == (0, "42\n", "")

    done = enter(
        instance, 'id -un; pwd; echo "$HOME|$EPOCHS|$HF_TOKEN|$MLU_VISIBLE_DEVICES|${CUDA_VISIBLE_DEVICES-unset}"'
    )
    home = str(on_slurm.system_disk(instance) / "root")
    assert done.stdout.splitlines() == [f"gpctest-u{owner.pk}", home, f"{home}|3|hf_secret_value|0,1|unset"]
    # The agent's credential and the console's own environment stay out
    done = enter(instance, "env")
    assert "GPUCLOUD_AGENT_TOKEN" not in done.stdout and "CONSOLE_ONLY" not in done.stdout

    # The exit status passes through, and the command's errors reach the caller's stderr without srun's notes
    done = enter(instance, "echo out; ls /no/such/folder; exit 3")
    assert done.returncode == 3 and done.stdout == "out\n"
    assert "No such file or directory" in done.stderr and "srun" not in done.stderr


def test_a_hub_model_mounted_into_the_running_machine_has_its_files_read_only_until_it_is_taken_down(
    on_slurm, slurm_instance, owner
):
    item = hub_services.save_item(repo="acme/slurm-model", summary="Tiny weights.")
    with transaction.atomic():
        hub_repos.publish_catalogue_files("acme/slurm-model", {"config.json": b'{"layers": 2}'}, "weights")

    mounts.mount(owner, slurm_instance, "acme/slurm-model")

    done = enter(slurm_instance, "cat ~/public/acme/slurm-model/config.json")
    assert (done.returncode, done.stdout) == (0, '{"layers": 2}'), done.stderr
    assert enter(slurm_instance, "echo x > ~/public/acme/slurm-model/config.json").returncode != 0

    # Taken down, its files are gone from the machine too (the mount stays, empty, as in a local machine)
    hub_repos.take_down(item, "a complaint")
    done = enter(slurm_instance, "ls -A ~/public/acme/slurm-model")
    assert (done.returncode, done.stdout) == (0, ""), done.stderr

    mounts.unmount(owner, slurm_instance, "acme/slurm-model")
    assert enter(slurm_instance, "ls ~/public/acme/slurm-model").returncode != 0


def test_a_shell_with_a_terminal_gets_one_in_the_job(on_slurm, slurm_instance):
    argv = get_backend("slurm").enter_argv(slurm_instance, "tty; exit 7")
    pid, terminal = pty.fork()
    if pid == 0:
        os.execvpe(argv[0], argv, {"PATH": os.environ["PATH"], "TERM": "xterm-256color"})
    output = b""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        ready, _, _ = select.select([terminal], [], [], 1)
        if not ready:
            continue
        try:
            chunk = os.read(terminal, 4096)
        except OSError:
            break
        if not chunk:
            break
        output += chunk
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 7
    assert b"/dev/pts/" in output and b"not a tty" not in output


def test_ssh_through_the_gateway_runs_commands_in_the_job_with_or_without_a_terminal(
    slurm_instance, gateway, owner_key
):
    result = ssh(gateway.port, owner_key, slurm_instance.public_id, "echo $((6*7)); exit 3")
    assert (result.returncode, result.stdout) == (3, b"42\n"), result.stderr

    result = ssh(gateway.port, owner_key, slurm_instance.public_id, "-tt", "[ -t 0 ] && echo on-a-terminal; exit 4")
    assert result.returncode == 4 and b"on-a-terminal" in result.stdout, result.stderr
