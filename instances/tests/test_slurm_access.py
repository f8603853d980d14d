"""Getting into a Slurm instance, without a cluster: which JupyterLab address an agent may make the console's proxy
use, the report that carries it, the page's buttons, and the srun command a shell runs."""

import os

import pytest
from rest_framework.test import APIClient

from instances import heartbeats, runtime
from instances import lifecycle as instance_lifecycle
from instances.backends import BackendError, Phase, get_backend
from instances.backends.slurm import (
    CHECKPOINT_TAG,
    SlurmBackend,
    agent_token,
    job_phase,
    jupyter_python,
    jupyter_token,
    lab_address_allowed,
    mark,
)
from instances.choices import Status
from instances.models import AgentReport, Instance

REPORT = {
    "event": "heartbeat",
    "job_id": "31",
    "metrics": {"source": "host", "card_utilisation": 5.0, "memory_used": 40.0},
}


def report_lab(instance, url, job_id="31"):
    heartbeats.record(instance, REPORT | {"job_id": job_id, "jupyter": {"url": url}})


@pytest.fixture
def running(launch):
    """An instance the console believes runs as Slurm job 31 on node ``localhost``."""
    instance = launch(chip="mlu370-x8", cards=2, image="pytorch-2.2-neuware")
    Instance.objects.filter(pk=instance.pk).update(
        status="running", backend_job_id="31", access={"node": "localhost", "job_id": "31"}
    )
    return Instance.objects.with_related().get(pk=instance.pk)


@pytest.mark.parametrize(
    ("url", "allowed"),
    [
        ("http://127.0.0.1:41234", True),  # what localhost resolves to
        ("http://localhost:41234", True),  # the node's Slurm name itself
        ("http://10.20.0.7:41234", False),  # another host
        ("http://169.254.169.254:8080", False),  # the cloud's metadata service
        ("http://127.0.0.1:80", False),  # a system service of the node
        ("http://127.0.0.1:1023", False),
        ("http://127.0.0.1:1024", True),
        ("https://127.0.0.1:41234", False),
        ("http://127.0.0.1", False),  # no port: 80
        ("http://user:pw@127.0.0.1:41234", False),
        ("http://127.0.0.1:41234/elsewhere/", False),
        ("http://127.0.0.1:99999", False),
        ("unix:///var/run/docker.sock", False),
        (None, False),
    ],
)
def test_a_lab_address_is_used_only_on_the_jobs_own_node_and_an_unprivileged_port(url, allowed):
    assert lab_address_allowed(url, "localhost") is allowed


def test_a_lab_address_on_a_node_is_not_one_on_another_node():
    assert not lab_address_allowed("http://127.0.0.1:41234", "")
    assert not lab_address_allowed("http://localhost:41234", "gpu-node-that-does-not-resolve.invalid")


@pytest.mark.django_db
def test_the_console_proxies_the_lab_the_current_jobs_agent_reported_with_the_instances_token(running):
    report_lab(running, "http://127.0.0.1:41234")
    server = get_backend("slurm").jupyter(running)
    assert server.url == "http://127.0.0.1:41234" and server.socket == ""
    assert server.token == jupyter_token(running.public_id) != jupyter_token("another")
    assert server.base_path == f"/instances/{running.public_id}/lab/"


@pytest.mark.django_db
@pytest.mark.parametrize("url", ["http://10.20.0.7:41234", "http://127.0.0.1:22", "http://169.254.169.254:8080"])
def test_an_agent_pointing_the_proxy_at_another_host_or_a_system_port_is_refused(running, url):
    # Stored without the API's checks, as if the serializer had let it through: the backend refuses it on its own.
    report_lab(running, url)
    assert get_backend("slurm").jupyter(running) is None


@pytest.mark.django_db
def test_the_report_endpoint_refuses_a_lab_address_off_the_allowed_shape(running):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Agent {agent_token(running.public_id)}")
    url = f"/api/v1/agent/instances/{running.public_id}/reports"
    for address in ["http://127.0.0.1:22", "file:///etc/passwd", "http://127.0.0.1:8888/../../admin"]:
        response = client.post(url, REPORT | {"jupyter": {"url": address}}, format="json")
        assert response.status_code == 400 and "jupyter" in response.json()["errors"], address
    assert not AgentReport.objects.exists()
    assert client.post(url, REPORT | {"jupyter": {"url": "http://127.0.0.1:8888"}}, format="json").status_code == 200
    assert heartbeats.latest(running).data["jupyter"] == {"url": "http://127.0.0.1:8888"}


@pytest.mark.django_db
def test_only_the_latest_report_of_the_current_job_of_a_running_instance_counts(running):
    backend = get_backend("slurm")
    report_lab(running, "http://127.0.0.1:41234", job_id="30")  # the previous run's job
    assert backend.jupyter(running) is None
    report_lab(running, "http://127.0.0.1:41234")
    heartbeats.record(running, REPORT)  # JupyterLab has stopped answering since
    assert backend.jupyter(running) is None
    report_lab(running, "http://127.0.0.1:41235")
    Instance.objects.filter(pk=running.pk).update(status="stopping")
    assert backend.jupyter(Instance.objects.get(pk=running.pk)) is None


def test_the_page_offers_jupyterlab_only_once_the_agent_reported_an_address():
    job = {"job_id": 31, "job_state": "RUNNING", "batch_host": "localhost", "start_time": 1, "comment": ""}
    common = {
        "wanted": "running",
        "reported": True,
        "grace": 10,
        "cards": 2,
        "chip": "MLU370",
        "spot_partition": "spot",
    }
    assert job_phase(job, **common).access["jupyter"] is False
    access = job_phase(job, **common, lab=True).access
    assert access["jupyter"] is True and access["ssh"] is True and access["node"] == "localhost"


def test_jupyterlab_runs_from_the_configured_python_the_local_runtime_or_not_at_all(settings, monkeypatch):

    assert jupyter_python({"jupyter_python": "/opt/lab/bin/python"}) == "/opt/lab/bin/python"
    assert jupyter_python({"jupyter_python": "off"}) == ""
    monkeypatch.setattr(runtime, "is_ready", lambda: True)
    assert jupyter_python({}) == str(runtime.path() / "bin" / "python")
    monkeypatch.setattr(runtime, "is_ready", lambda: False)
    assert jupyter_python({}) == ""


@pytest.mark.django_db
def test_a_shell_is_srun_into_the_job_as_the_jobs_user_in_the_home_with_the_workloads_environment(
    running, monkeypatch, settings
):
    settings.SLURM = {**settings.SLURM, "root": "/srv/gpucloud", "user": "root", "job_user_template": ""}
    backend = SlurmBackend()
    monkeypatch.setattr(backend, "_current_job", lambda instance, config: {"job_id": 31, "job_state": "RUNNING"})

    argv = backend.enter_argv(running, "echo $((6*7))")

    srun = argv.index("srun")
    assert argv[srun : srun + 7] == ["srun", "-QQ", "--jobid", "31", "--overlap", "--unbuffered", "--export=TERM"]
    system = f"/srv/gpucloud/instances/{running.public_id}"
    assert argv[srun + 7 : srun + 9] == ["--chdir", f"{system}/root"]
    assert f". {system}/.gpucloud/environment" in argv[srun + 11]
    assert argv[-3:] == ["/bin/bash", "-c", "echo $((6*7))"]
    assert backend.enter_argv(running, None)[-2:] == ["/bin/bash", "-l"]
    if os.geteuid() == 0:
        assert argv[:3] == ["setpriv", "--reuid=root", "--regid=0"]


@pytest.mark.django_db
def test_a_job_that_is_not_running_or_is_being_stopped_cannot_be_entered(running, monkeypatch):

    backend = SlurmBackend()
    for job in [
        None,
        {"job_id": 31, "job_state": "PENDING"},
        {"job_id": 31, "job_state": "RUNNING", "comment": mark(CHECKPOINT_TAG, 31, 1.0)},
    ]:
        monkeypatch.setattr(backend, "_current_job", lambda instance, config, job=job: job)
        with pytest.raises(BackendError, match="not running"):
            backend.enter_argv(running, "true")


@pytest.mark.django_db
def test_what_an_agent_says_of_the_previous_runs_job_never_makes_a_run_of_a_restarted_machine(running, monkeypatch):
    # The agent's token lives until the machine is released, so the owner's code may post reports naming any job
    backend = SlurmBackend()
    # Slurm has forgotten job 31 by now
    monkeypatch.setattr(backend, "_listed_jobs", lambda members, starts: {i.public_id: None for i, _c in members})
    Instance.objects.filter(pk=running.pk).update(status=Status.STOPPED, wanted="stopped")
    restarted = instance_lifecycle.start(Instance.objects.with_related().get(pk=running.pk))
    heartbeats.record(restarted, {"event": "started", "job_id": "31"})
    heartbeats.record(restarted, {"event": "exited", "job_id": "31", "exit_code": 0})

    status = backend.status_many([Instance.objects.with_related().get(pk=running.pk)])[running.public_id]
    assert status.phase == Phase.ABSENT and status.ran_from is None  # not a run: this start submits its own job
