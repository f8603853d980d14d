"""The Slurm backend's reading of jobs (every state the console can meet), its credentials, and the REST client
against the real cluster."""

import base64
import hashlib
import hmac
import json
import os
import shutil
import subprocess
import time
from datetime import UTC, datetime, timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone, translation

from agent import gpucloud_agent as agent_module
from catalog.models import Node
from instances import lifecycle
from instances.backends import BackendError, Phase, TransientBackendError
from instances.backends.slurm import (
    CHECKPOINT_TAG,
    PREEMPTED_TAG,
    SlurmBackend,
    SlurmClient,
    SlurmError,
    _account_owner,
    agent_path,
    agent_token,
    changed_request,
    check_agent_token,
    job_phase,
    mark,
    sign_jwt,
    zone_settings,
)
from instances.choices import Status
from instances.models import Instance, InstanceEvent

NOW = 1_800_000_000.0


def phase(job, *, wanted="running", reported=False, grace=10.0):
    return job_phase(
        job, wanted=wanted, reported=reported, grace=grace, cards=2, chip="MLU370-X8", spot_partition="spot", now=NOW
    )


def job(state, **fields):
    base = {
        "job_id": 7,
        "name": "inst-x",
        "job_state": state,
        "state_reason": "None",
        "partition": "xinchuang",
        "restart_cnt": 0,
        "submit_time": NOW - 100,
        "start_time": NOW - 90,
        "end_time": NOW - 5,
        "comment": "",
        "batch_host": "localhost",
    }
    return base | fields


def listed(job_id, name, user, *, state="RUNNING", age=600, now=None, **fields):
    """A job as the cluster's listing shows it: ``name``, run as ``user``, submitted ``age`` seconds before ``now``."""
    submitted = int(now if now is not None else time.time()) - age
    return {"job_id": job_id, "name": name, "user_name": user, "job_state": state, "submit_time": submitted} | fields


@pytest.fixture
def english():
    with translation.override("en"):
        yield


def test_a_job_waiting_for_cards_says_so_in_plain_words(english):
    status = phase(job("PENDING", state_reason="Resources"))
    assert status.phase == Phase.BOOTING and status.message == "waiting for 2 free MLU370-X8 cards"
    assert "queued behind" in phase(job("PENDING", state_reason="Priority")).message


def test_a_job_waiting_for_resources_names_the_cpus_and_memory_it_waits_for_beside_its_cards(english):
    # Slurm says "Resources" whichever of them is short: a node with free cards may lack the CPUs or the memory.
    waiting = job("PENDING", state_reason="Resources")
    asked = {"wanted": "running", "reported": False, "grace": 10.0, "spot_partition": "spot", "now": NOW}
    status = job_phase(waiting, cards=2, chip="MLU370-X8", cpus=24, memory_gb=192, **asked)
    assert status.message == "waiting for a node with 2 free MLU370-X8 cards, 24 vCPUs and 192 GB"
    status = job_phase(waiting, cards=0, chip="", cpus=8, memory_gb=32, **asked)
    assert status.message == "waiting for a node with 8 free vCPUs and 32 GB"


def test_a_running_job_is_running_only_once_its_agent_reported():
    assert phase(job("RUNNING")).phase == Phase.BOOTING
    status = phase(job("RUNNING"), reported=True)
    assert status.phase == Phase.RUNNING and status.since.timestamp() == NOW - 90
    assert status.access["attach_command"] == "srun --jobid 7 --overlap --pty bash"
    assert status.access["simulated"] is False and status.access["node"] == "localhost"


def test_a_signalled_job_is_stopping_until_the_grace_ends():
    status = phase(job("RUNNING", comment=mark(CHECKPOINT_TAG, 7, NOW - 4)), reported=True, grace=10)
    assert status.phase == Phase.STOPPING and status.ready_in == pytest.approx(6)
    assert phase(job("COMPLETING")).phase == Phase.STOPPING


def test_a_requeued_spot_job_is_preempted_at_the_moment_slurm_requeued_it():
    requeued = job("PENDING", partition="spot", restart_cnt=1, state_reason="BeginTime", submit_time=NOW - 30)
    status = phase(requeued)
    assert status.phase == Phase.PREEMPTED and status.since.timestamp() == NOW - 30
    assert phase(job("CANCELLED", comment=mark(PREEMPTED_TAG, 7, NOW - 30))).since.timestamp() == NOW - 30
    assert phase(job("PREEMPTED", partition="spot")).phase == Phase.PREEMPTED


@pytest.mark.parametrize(
    ("state", "message"),
    [
        ("NODE_FAIL", "the node running the instance failed"),
        ("FAILED", "the instance's job failed"),
        ("TIMEOUT", "the instance's job reached its time limit"),
        ("COMPLETED", "the instance's workload exited"),
        ("CANCELLED", "the cluster cancelled the instance's job"),
    ],
)
def test_a_job_that_ended_under_a_running_instance_fails_it_when_it_ended(state, message, english):
    status = phase(job(state))
    assert status.phase == Phase.FAILED and status.message == message
    assert status.since.timestamp() == NOW - 5  # billing stops when the job ended, not when the console noticed


def test_an_ended_job_is_a_stop_when_the_owner_wanted_it_stopped_or_the_console_signalled_it():
    assert phase(job("CANCELLED"), wanted="stopped").phase == Phase.STOPPED
    assert phase(job("CANCELLED", comment=mark(CHECKPOINT_TAG, 7, NOW - 20))).phase == Phase.STOPPED


def test_only_the_consoles_own_signed_marks_count_not_what_the_jobs_user_writes_in_its_comment():
    # A job's user may rewrite its comment (so may the owner's code, from any job of its account): a preemption mark
    # it writes with an early time would end the bill there; a signal mark, stop the console from signalling
    running = job("RUNNING", partition="spot")
    for forged in [
        f"gpucloud:preempted@{NOW - 3600:.3f}",
        mark(PREEMPTED_TAG, 8, NOW - 3600),  # the console's mark of another job
        mark(PREEMPTED_TAG, 7, NOW - 30).replace(f"{NOW - 30:.3f}", f"{NOW - 3600:.3f}"),  # its time changed
    ]:
        assert phase(running | {"comment": forged}, reported=True).phase == Phase.RUNNING
    assert phase(running | {"comment": f"gpucloud:checkpoint@{NOW - 4:.3f}"}, reported=True).phase == Phase.RUNNING
    assert phase(running | {"comment": mark(PREEMPTED_TAG, 7, NOW - 30)}, reported=True).phase == Phase.PREEMPTED


ASKED = {"partition": "spot", "spot": True, "tres_per_node": "gres:gpu:mlu370:2", "time_limit": 60}


@pytest.mark.parametrize(
    ("changed", "said"),
    [
        ({}, []),
        ({"time_limit": 30}, []),  # a shorter limit costs the console nothing
        ({"cpus": 64, "memory_per_node": 512000}, []),  # Slurm itself may raise CPUs to fit memory, or round them
        ({"tres_per_task": "cpu=24"}, []),  # newer Slurm's record of CPUs per task
        ({"partition": "xinchuang"}, ["partition xinchuang"]),
        ({"tres_per_node": "gres:gpu:mlu370:8"}, ["cards gres:gpu:mlu370:8"]),
        ({"tres_per_node": "gres/gpu:mlu370:2"}, []),  # newer Slurm's spelling of the same request
        ({"tres_per_job": "gres:gpu:mlu370:4"}, ["cards gres:gpu:mlu370:2, gres:gpu:mlu370:4"]),
        ({"tres_per_socket": "gres/gpu:1"}, ["cards gres:gpu:mlu370:2, gres/gpu:1"]),
        ({"node_count": 2}, ["2 nodes"]),
        ({"time_limit": None}, ["time limit none"]),
        ({"time_limit": 600, "partition": "xinchuang"}, ["partition xinchuang", "time limit 600 minutes"]),
    ],
)
def test_what_a_jobs_user_changed_in_its_request_is_named(changed, said, english):
    asked = job("PENDING", partition="spot", tres_per_node="gres:gpu:mlu370:2", time_limit=60, node_count=1)
    assert changed_request(asked | {"cpus": 24, "memory_per_node": 196608} | changed, ASKED) == said


def test_an_on_demand_job_may_be_in_any_partition_and_a_job_without_a_limit_asked_may_have_any():
    # The partition an on-demand job waits in changes nothing the console bills; the spot one's does
    asked = ASKED | {"partition": "xinchuang", "spot": False, "time_limit": None}
    moved = job("PENDING", partition="nvidia", tres_per_node="gres:gpu:mlu370:2", time_limit=None)
    assert changed_request(moved, asked) == []


@pytest.mark.parametrize(
    ("name", "owner"),
    [("gpucloud-u42", 42), ("gpucloud-u", None), ("gpucloud-uadmin", None), ("slurm", None), ("xgpucloud-u4", None)],
)
def test_a_per_owner_account_names_its_owner(name, owner):
    assert _account_owner(name, "gpucloud-u{owner}") == owner


def test_a_job_slurm_no_longer_knows_is_absent():
    assert phase(None).phase == Phase.ABSENT


def test_the_console_signs_tokens_slurmctld_accepts():
    token = sign_jwt(b"k" * 32, "gpucloud", lifespan=60, now=NOW)
    header, payload, signature = token.split(".")
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    assert claims == {"iat": int(NOW), "exp": int(NOW) + 60, "sun": "gpucloud"}
    expected = hmac.new(b"k" * 32, f"{header}.{payload}".encode(), hashlib.sha256).digest()
    assert base64.urlsafe_b64decode(signature + "=" * (-len(signature) % 4)) == expected


def test_an_agent_token_opens_only_its_own_instance():
    token = agent_token("5b6f4a3e-0000-4000-8000-000000000001")
    assert check_agent_token("5b6f4a3e-0000-4000-8000-000000000001", token)
    assert not check_agent_token("5b6f4a3e-0000-4000-8000-000000000002", token)
    assert not check_agent_token("5b6f4a3e-0000-4000-8000-000000000001", "")


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run the agent as another account")
def test_jobs_run_a_readable_copy_of_the_agent_even_from_a_private_checkout(tmp_path, monkeypatch):
    # A checkout in a private home folder: the jobs' accounts cannot read the agent file where it lies.
    checkout = tmp_path / "home"
    checkout.mkdir(mode=0o700)
    private = checkout / "gpucloud_agent.py"
    shutil.copyfile(agent_module.__file__, private)
    monkeypatch.setattr(agent_module, "__file__", str(private))
    root = tmp_path / "root"
    root.mkdir()
    for folder in (root, *root.parents):  # the cluster's root is searchable by every account, as on the nodes
        os.chmod(folder, os.stat(folder).st_mode | 0o001)
    os.chmod(checkout, 0o700)
    config = {"root": str(root), "agent_path": ""}

    path = agent_path(config)
    as_nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/python3", "-I"]
    assert subprocess.run([*as_nobody, str(private), "--help"], capture_output=True).returncode != 0
    ran = subprocess.run([*as_nobody, path, "--help"], capture_output=True, text=True, cwd="/")
    assert ran.returncode == 0, ran.stderr
    assert "--instance" in ran.stdout
    assert agent_path(config) == path  # the same content: the same file, not a new copy per job

    private.write_text(private.read_text() + "\n# upgraded\n")
    upgraded = agent_path(config)
    assert upgraded != path and os.path.exists(path)  # a running job's file stays; new jobs get the new one
    assert agent_path({"root": str(root), "agent_path": "/srv/agent.py"}) == "/srv/agent.py"


def test_zone_settings_override_the_cluster_defaults(settings):
    settings.SLURM = {"rest_url": "http://a", "user": "u", "partition": "p", "spot_partition": "s"}
    settings.SLURM_ZONES = {"z1": {"partition": "xinchuang"}}
    assert zone_settings("z1")["partition"] == "xinchuang" and zone_settings("z1")["rest_url"] == "http://a"
    assert zone_settings("other")["partition"] == "p"


def test_an_unreachable_controller_is_a_transient_error():
    client = SlurmClient({"rest_url": "http://127.0.0.1:9", "user": "gpucloud", "token": "x", "timeout": 2})
    with pytest.raises(TransientBackendError):
        client.jobs()


@pytest.mark.slurm
def test_the_rest_client_reads_refuses_and_signals_real_jobs(settings):
    client = SlurmClient(settings.SLURM)
    assert client.job(999_999) is None  # unknown: no error, nothing to act on
    too_many = {
        "name": "test-too-many",
        "partition": "xinchuang",
        "gres": "gpu:mlu370:9",
        "current_working_directory": "/tmp",
        "environment": {"PATH": "/usr/bin:/bin"},
    }
    with pytest.raises(SlurmError) as refused:
        client.submit("#!/bin/bash\nsleep 1\n", too_many)
    assert 2014 in refused.value.numbers and isinstance(refused.value, BackendError)

    job_id = client.submit("#!/bin/bash\ntrap '' USR1\nsleep 60 & wait $!\n", too_many | {"gres": "gpu:z100:1"})
    try:
        deadline = time.monotonic() + 10
        while client.job(job_id)["job_state"] != "RUNNING" and time.monotonic() < deadline:
            time.sleep(0.1)
        assert client.job(job_id)["gres_detail"][0].startswith("gpu:z100:1(IDX:")  # a typed card, no other chip's
        client.update(job_id, {"comment": f"{CHECKPOINT_TAG}{NOW}"})
        client.signal(job_id, "SIGUSR1")
        assert client.job(job_id)["comment"] == f"{CHECKPOINT_TAG}{NOW}"
    finally:
        client.cancel(job_id)
    client.cancel(job_id)  # twice is harmless


@pytest.mark.django_db
def test_use_slurm_moves_only_the_chips_with_a_gres_type_and_off_moves_them_back(catalog):
    call_command("use_slurm", "cn-east-xc", "cn-east-a", stdout=open(os.devnull, "w"))  # noqa: SIM115
    on_slurm = set(Node.objects.filter(backend_name="slurm").values_list("chip__slug", flat=True))
    assert on_slurm == {"ascend-910b", "mlu370-x8", "dcu-z100", "a800-80g"}
    assert Node.objects.filter(chip__slug="a100-80g", backend_name="simulated").count() == 2  # no GRES type

    call_command("use_slurm", "--off", stdout=open(os.devnull, "w"))  # noqa: SIM115
    assert not Node.objects.filter(backend_name="slurm").exists()


class Stub:
    """Just what the disk and mount calls read from an instance."""

    def __init__(self):
        self.public_id = "5b6f4a3e-0000-4000-8000-000000000009"
        self.zone = type("Zone", (), {"slug": "cn-east-xc"})()
        self.backend_job_id = ""
        self.owner_id = 7


def test_disks_and_storage_are_links_on_the_system_disk(settings, tmp_path):
    settings.SLURM = {**settings.SLURM, "root": str(tmp_path), "job_user_template": ""}
    backend, instance = SlurmBackend(), Stub()
    system = tmp_path / "instances" / instance.public_id
    backend.mount(instance, "cloudstorage/u-1", "/root/shared")
    backend.attach_disk(instance, "disk-1", 10, name="checkpoints")
    backend.attach_disk(instance, "disk-1", 10, name="checkpoints")  # a repeat is a no-op

    home = system / "root"
    assert os.readlink(home / "shared") == str(tmp_path / "shared" / "u-1") and (tmp_path / "shared" / "u-1").is_dir()
    assert os.readlink(home / "data" / "checkpoints") == str(tmp_path / "disks" / "disk-1")
    layout = json.loads((system / ".gpucloud" / "layout.json").read_text())
    assert layout["disks"] == [{"id": "disk-1", "folder": "checkpoints"}]
    assert [(m["target"], m["read_only"]) for m in layout["mounts"]] == [("/root/shared", False)]

    backend.detach_disk(instance, "disk-1")
    assert not (home / "data" / "checkpoints").exists()
    with pytest.raises(BackendError):
        backend.mount(instance, "x", "/etc/passwd")
    assert (tmp_path / "disks" / "disk-1").is_dir()  # detaching never deletes the disk

    # A team's machine has the team's cloud storage at /root/shared-team: read-write, as a person's /root/shared.
    backend.mount(instance, "cloudstorage/team-1", "/root/shared-team")
    assert os.readlink(home / "shared-team") == str(tmp_path / "shared" / "team-1")
    layout = json.loads((system / ".gpucloud" / "layout.json").read_text())
    team_mount = next(m for m in layout["mounts"] if m["target"] == "/root/shared-team")
    assert team_mount["read_only"] is False


def test_disks_are_at_their_names_a_second_of_one_name_at_name_2_and_a_layout_of_bare_ids_still_serves(
    settings, tmp_path
):
    settings.SLURM = {**settings.SLURM, "root": str(tmp_path), "job_user_template": ""}
    backend, instance = SlurmBackend(), Stub()
    system = tmp_path / "instances" / instance.public_id
    data = system / "root" / "data"

    def layout():
        return json.loads((system / ".gpucloud" / "layout.json").read_text())["disks"]

    def links():
        return {link.name: os.readlink(link) for link in data.iterdir()}

    # A layout from before disks had folders of their own: bare ids, each disk at /root/data/<id>
    (system / ".gpucloud").mkdir(parents=True)
    agent_module.write_layout(system, {"disks": ["disk-old", "disk-b"], "mounts": []})
    agent_module.apply_layout(tmp_path, system, agent_module.read_layout(system))
    assert links() == {"disk-old": str(tmp_path / "disks" / "disk-old"), "disk-b": str(tmp_path / "disks" / "disk-b")}

    # Attached by name: there under its name; a second disk of that name at <name>-2; an unsafe name: its id
    backend.attach_disk(instance, "disk-a", 1, name="data")
    backend.attach_disk(instance, "disk-c", 1, name="data")
    backend.attach_disk(instance, "disk-a", 2, name="data")  # grown: stays where it is
    backend.attach_disk(instance, "disk-d", 1, name="..")
    assert links() == {
        "disk-old": str(tmp_path / "disks" / "disk-old"),
        "disk-b": str(tmp_path / "disks" / "disk-b"),
        "data": str(tmp_path / "disks" / "disk-a"),
        "data-2": str(tmp_path / "disks" / "disk-c"),
        "disk-d": str(tmp_path / "disks" / "disk-d"),
    }

    # A bare id the console attaches again (the next start) moves to its name, in its place in the layout
    backend.attach_disk(instance, "disk-b", 1, name="实验 数据")
    assert "disk-b" not in links() and links()["实验 数据"] == str(tmp_path / "disks" / "disk-b")
    assert layout()[:2] == ["disk-old", {"id": "disk-b", "folder": "实验 数据"}]

    # Detaching removes that disk's entry and link alone, whether a bare id or named
    backend.detach_disk(instance, "disk-old")
    backend.detach_disk(instance, "disk-a")
    assert sorted(links()) == ["data-2", "disk-d", "实验 数据"]
    assert [entry["id"] for entry in layout()] == ["disk-b", "disk-c", "disk-d"]
    assert all((tmp_path / "disks" / disk).is_dir() for disk in ("disk-old", "disk-a"))  # never deleted


class RecordingClient:
    """A slurmrestd client that records what the console asks of it."""

    def __init__(self):
        self.calls = []

    def update(self, job_id, fields):
        self.calls.append(("update", job_id))

    def signal(self, job_id, name):
        self.calls.append(("signal", job_id, name))

    def cancel(self, job_id):
        self.calls.append(("cancel", job_id))


def test_a_stop_cancels_the_job_when_the_grace_since_it_was_asked_ends_even_with_its_mark_erased(monkeypatch):
    # The job's user erases the console's signal mark after every signal: each look would start the grace again
    backend, client, instance = SlurmBackend(), RecordingClient(), Stub()
    instance.stop_requested_at = datetime.fromtimestamp(time.time() - 30, tz=UTC)
    monkeypatch.setattr(backend, "client", lambda config, as_console=False: client)
    monkeypatch.setattr(backend, "_current_job", lambda instance, config: job("RUNNING", comment=""))
    backend.stop(instance, grace_seconds=60)
    assert ("cancel", 7) not in client.calls and ("signal", 7, "SIGUSR1") in client.calls  # within the grace
    backend.stop(instance, grace_seconds=20)
    assert ("cancel", 7) in client.calls  # 30 s since the stop was asked, more than its grace


class ListingClient(RecordingClient):
    """A cluster that lists ``listing`` and records cancels."""

    def __init__(self, listing):
        super().__init__()
        self.listing = listing

    def jobs(self):
        return self.listing

    def job(self, job_id):
        return next((job for job in self.listing if str(job["job_id"]) == str(job_id)), None)


def slurm_machine(monkeypatch, settings, launch, *, name, status, job_id, client_class=None):
    """A machine launched on the Slurm backend (``status``, recorded job ``job_id``) in a cluster whose client (a
    :class:`ListingClient`, or ``client_class``) lists nothing until the test sets its listing: (the machine, the
    client)."""
    settings.SLURM = settings.SLURM | {"job_user_template": "gpctest-u{owner}", "job_prefix": "inst-"}
    instance = launch(name=name)
    Instance.objects.filter(pk=instance.pk).update(backend_name="slurm", status=status, backend_job_id=job_id)
    Node.objects.filter(zone=instance.zone).update(backend_name="slurm")
    client = (client_class or ListingClient)([])
    monkeypatch.setattr(SlurmBackend, "client", lambda self, config, as_console=False: client)
    return Instance.objects.with_related().get(pk=instance.pk), client


@pytest.mark.django_db
def test_the_sweep_cancels_the_jobs_no_instance_claims_and_spares_those_just_submitted(
    monkeypatch, settings, launch, owner
):
    settings.SLURM = settings.SLURM | {"job_user_template": "gpctest-u{owner}", "job_prefix": "inst-"}
    made, now = {}, time.time()
    for name, status, job_id, stopped_hours_ago in [
        ("running", Status.RUNNING, "10", None),
        ("submitting", Status.STARTING, "", None),
        ("stopped", Status.STOPPED, "30", 1),
        ("respotting", Status.STARTING, "40", None),
        ("stale", Status.STARTING, "50", None),
        ("reclaimed", Status.PREEMPTED, "90", 0),  # in its notice window: its job is still being checkpointed
        ("reclaimed-long-ago", Status.PREEMPTED, "95", 48),
    ]:
        instance = launch(name=name)
        stopped = timezone.now() - timedelta(hours=stopped_hours_ago) if stopped_hours_ago is not None else None
        Instance.objects.filter(pk=instance.pk).update(
            backend_name="slurm", status=status, backend_job_id=job_id, stopped_at=stopped, reserved_cards=0
        )
        made[name] = f"inst-{instance.public_id}"
    InstanceEvent.objects.filter(new=Status.STARTING).update(at=timezone.now() - timedelta(hours=1))  # runs began
    Node.objects.filter(zone=instance.zone).update(backend_name="slurm")
    account = f"gpctest-u{owner.pk}"

    def of(job_id, name, user=account, state="RUNNING", age=600):
        return listed(job_id, name, user, state=state, age=age, now=now)

    listing = [
        of(10, made["running"]),  # the running machine's recorded job
        of(11, made["running"], state="PENDING"),  # the tenant's own job, named like its machine
        of(20, made["submitting"], age=2),  # the console's, its id not yet recorded: the first since the start
        of(21, made["submitting"], age=1),  # a copy the tenant submitted under the same name
        of(30, made["stopped"], state="PENDING"),  # a stopped machine's job, requeued by its user
        of(31, made["stopped"], state="COMPLETED"),  # ended: nothing to cancel
        of(41, made["respotting"], state="PENDING", age=5),  # a reclaimed spot job going back: just submitted
        of(51, made["stale"], state="PENDING", age=300),  # of its name, but long before: not its job
        of(60, "anything", user=f"gpctest-u{owner.pk + 1000}"),  # an owner with no machine here
        of(70, "operator", user="slurm"),  # not a tenant's account
        of(80, "stopped-by-hand", state="STOPPED"),  # SIGSTOPped, still holding its cards
        of(90, made["reclaimed"]),
        of(95, made["reclaimed-long-ago"], state="PENDING"),  # requeued by its user after the console ended it
    ]
    client = ListingClient(listing)
    monkeypatch.setattr(SlurmBackend, "client", lambda self, config, as_console=False: client)

    assert SlurmBackend().sweep() == 7
    assert sorted(call[1] for call in client.calls) == [11, 21, 30, 51, 60, 80, 95]


class CountingClient(ListingClient):
    """A cluster that counts how often its whole queue is listed."""

    def __init__(self, listing):
        super().__init__(listing)
        self.listed = 0

    def jobs(self):
        self.listed += 1
        return self.listing


@pytest.mark.django_db
def test_a_reconcile_beat_lists_the_clusters_jobs_once_for_its_sweep_and_its_statuses(
    monkeypatch, settings, launch, owner
):
    instance, client = slurm_machine(
        monkeypatch,
        settings,
        launch,
        name="running",
        status=Status.RUNNING,
        job_id="10",
        client_class=CountingClient,
    )
    running = listed(10, f"inst-{instance.public_id}", f"gpctest-u{owner.pk}")
    backend = SlurmBackend()
    running["tres_per_node"] = backend.requested(instance, backend.config(instance))["tres_per_node"]
    client.listing = [running]

    assert lifecycle.reconcile() == 1
    assert client.listed == 1 and client.calls == []  # the sweep's listing, read again by the statuses
    # a beat whose sweep cancels a job the tenant submitted: the statuses do not read the listing that had it running
    client.listing = [running, running | {"job_id": 11, "job_state": "PENDING", "submit_time": int(time.time())}]
    lifecycle.reconcile()
    assert client.calls == [("cancel", 11)] and client.listed == 3
    # outside a beat, a look at the instance lists afresh
    SlurmBackend().status_many([Instance.objects.with_related().get(pk=instance.pk)])
    assert client.listed == 4


@pytest.mark.django_db
def test_before_its_job_id_is_recorded_a_machine_is_its_first_job_since_its_start_not_a_later_copy_of_its_name(
    monkeypatch, settings, launch, owner
):
    # Given a machine whose job was submitted, its id not yet recorded, and a copy its tenant submitted under the
    # same name a second later, which failed at once
    instance, client = slurm_machine(
        monkeypatch, settings, launch, name="submitting", status=Status.STARTING, job_id=""
    )
    InstanceEvent.objects.create(
        instance=instance, old=Status.CREATING, new=Status.STARTING, at=timezone.now() - timedelta(seconds=30)
    )
    now, name, account = int(time.time()), f"inst-{instance.public_id}", f"gpctest-u{owner.pk}"
    console = listed(20, name, account, state="PENDING", age=20, now=now, state_reason="Priority")
    copy = listed(21, name, account, state="FAILED", age=19, now=now)
    earlier = listed(5, name, account, state="COMPLETED", age=3600, now=now)
    client.listing = [earlier, console, copy]
    backend = SlurmBackend()

    # Then the machine is the console's job, waiting in the queue, as the sweep sees it (it spares that one): the
    # copy's failure is not the machine's
    assert backend.queue_entries([instance])[instance.public_id]["job_id"] == "20"
    assert backend.queue_entry(instance)["job_id"] == "20"  # one instance's look, and its stop and release
    assert backend.status_many([instance])[instance.public_id].phase == Phase.BOOTING
    assert backend.sweep() == 0 and client.calls == []


@pytest.mark.django_db
def test_a_requeued_machine_is_its_accounts_newest_job_of_its_name_not_another_accounts(
    monkeypatch, settings, launch, owner
):
    # Given a spot machine whose recorded job Slurm no longer lists (requeued under a new id), its account's new job,
    # and a newer job of the same name that another account submitted
    instance, client = slurm_machine(monkeypatch, settings, launch, name="requeued", status=Status.RUNNING, job_id="10")
    name = f"inst-{instance.public_id}"
    own = listed(30, name, f"gpctest-u{owner.pk}", state="PENDING", age=60)
    other = listed(31, name, f"gpctest-u{owner.pk + 1000}", state="PENDING", age=30)
    client.listing = [own, other]
    backend = SlurmBackend()

    # Then the machine is its account's job, in the listing's look and in one instance's look
    assert backend.queue_entries([instance])[instance.public_id]["job_id"] == "30"
    assert backend.queue_entry(instance)["job_id"] == "30"


@pytest.mark.django_db
def test_a_machine_whose_job_slurm_forgot_is_not_an_earlier_job_of_its_name_its_account_requeued(
    monkeypatch, settings, launch, owner
):
    # Given a machine whose recorded job Slurm no longer lists, and an earlier run's job of its name that its tenant
    # requeued from inside the machine (`scontrol requeue` keeps a job's id): running again, as its account
    instance, client = slurm_machine(monkeypatch, settings, launch, name="forgot", status=Status.RUNNING, job_id="10")
    earlier = listed(5, f"inst-{instance.public_id}", f"gpctest-u{owner.pk}", state="RUNNING", age=3600)
    client.listing = [earlier]
    backend = SlurmBackend()

    # Then that job is not the machine, in the listing's look or in one instance's look, and the sweep cancels it
    assert backend.queue_entries([instance])[instance.public_id] is None
    assert backend.queue_entry(instance) is None
    assert backend.sweep() == 1 and client.calls == [("cancel", 5)]


@pytest.mark.django_db
def test_a_running_machine_submitted_again_is_its_recorded_job_not_a_second_one(monkeypatch, settings, launch, owner):
    # Given a running machine whose recorded job the cluster lists, running as its account
    instance, client = slurm_machine(monkeypatch, settings, launch, name="again", status=Status.RUNNING, job_id="10")
    client.listing = [listed(10, f"inst-{instance.public_id}", f"gpctest-u{owner.pk}", state="RUNNING")]

    # When the console submits it again (a retried start lands here), it is that job, and nothing is submitted
    assert SlurmBackend().submit(instance) == "10"
    assert client.calls == []
