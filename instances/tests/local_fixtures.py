"""Fixtures for the local backend: real bubblewrap sandboxes on this host.

``on_local`` points every node of the catalog at the local backend, gives the test its own sandbox root (so its
machines, homes and disks are told apart and cleaned up), starts a live console for the agents' reports, and
kills every machine of the test when it ends. Homes are loop-mounted ext4 images: the test fails if any mount or
loop device of its sandbox root outlives its machines, and its teardown undoes them either way, so none is left on
the host for the next test or the next CI job. ``local_console`` does the same for browser tests, whose machines a
real worker process starts for the console served under uvicorn. Outside CI the tests skip where the host cannot
run sandboxes.
"""

import os
import shutil
import signal
import subprocess
import tempfile
from contextlib import contextmanager
from pathlib import Path

import pytest

from catalog.models import Node
from instances import lifecycle
from instances.backends import get_backend, local, local_home, local_volumes
from instances.choices import Status
from instances.models import Instance
from instances.tests.fixtures import settle_until


class LocalHost:
    """The test's view of its sandboxes."""

    def __init__(self, root: Path, cloud: Path | None = None):
        self.root = root
        self.cloud = cloud or root / "cloud"  # the cloud storage location (the accounts' trees)

    def storage(self, account) -> Path:
        """The account's cloud storage tree on the host: what its machines see at /root/shared."""
        return self.cloud / str(account.public_id)

    def folder(self, instance) -> Path:
        return self.root / "instances" / str(instance.public_id)

    def home(self, instance) -> Path:
        return self.folder(instance) / "root"

    @contextmanager
    def stopped_home(self, instance):
        """A stopped instance's home, mounted for the while when it is an image (as the backend reads it)."""
        with local_home.opened(self.folder(instance)) as home:
            yield home

    def _places(self) -> tuple[str, str]:
        return f"{self.root}/", f"{self.cloud}/"

    def mounts(self) -> list[str]:
        """The mount points in this test's sandbox root or cloud storage location."""
        return [p for p in local._mount_points() if p.startswith(self._places())]

    def loop_devices(self) -> list[str]:
        """The loop devices whose backing file is in this test's sandbox root or cloud storage location."""
        found = []
        for backing in Path("/sys/block").glob("loop*/loop/backing_file"):
            try:
                if backing.read_text().startswith(self._places()):
                    found.append(f"/dev/{backing.parent.parent.name}")
            except OSError:
                pass
        return found

    def undo_mounts(self) -> None:
        for point in sorted(self.mounts(), key=len, reverse=True):
            subprocess.run(["umount", "-l", point], capture_output=True, check=False)
        for device in self.loop_devices():
            subprocess.run(["losetup", "-d", device], capture_output=True, check=False)

    def settle(self, until=None, timeout: float = 90.0, message: str = "the instances to settle") -> None:
        settle_until(until, timeout=timeout, message=message)

    def run(self, instance, command: str, timeout: float = 30) -> "subprocess.CompletedProcess":  # noqa: F821
        """``command`` run inside the instance, as an SSH session would run it."""

        argv = get_backend("local").enter_argv(instance, command)
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)

    def kill_all(self) -> None:
        """Every machine killed, then the disks and storage folders unmounted (the host keeps them mounted while
        they exist)."""
        backend = get_backend("local")
        for path in (self.root / "instances").glob("*"):
            backend._kill(path.name, local.read_state(path.name))
        local_volumes.unmount_all(self.root, self.cloud)


def local_unavailable() -> str:
    ok, why = local.availability()
    return "" if ok else why


def _tear_down(host: LocalHost, request) -> None:
    """Every machine killed and every mount and loop device of the test undone; the test fails if any outlived its
    machines. The sandbox root goes unless the test failed (its machines' logs are kept)."""
    host.kill_all()
    leaked = host.mounts(), host.loop_devices()
    host.undo_mounts()
    assert leaked == ([], []), f"mounts or loop devices outlived the test's machines: {leaked}"
    report = getattr(request.node, "rep_call", None)
    if report is None or not report.failed:
        shutil.rmtree(host.root, ignore_errors=True)


# The size of an account's cloud storage image here. The product's ceiling (500 GB) is a sparse image the host
# limits to what it can still hold and refuses below 1% of it: on a CI host with 60 GB free, beside another lane's
# machines, that refusal would depend on the host, not on the code under test. Tests that are about the ceiling
# set their own.
TEST_STORAGE_MAX_GB = 4


@pytest.fixture
def on_local(request, settings, catalog):
    """Every node on the local backend, in a sandbox root of this test's own; yields a :class:`LocalHost`."""
    why = local_unavailable()
    if why:
        pytest.skip(f"no local sandboxes here: {why}")
    live_server = request.getfixturevalue("live_server")
    root = Path(tempfile.mkdtemp(prefix="gpucloud-sbx-", dir="/tmp"))
    settings.LOCAL_SANDBOX_ROOT = root
    settings.LOCAL_HUB_ROOT = root / "hub"
    # The accounts' cloud storage trees (bound at /root/shared) in the sandbox root too: their images are the
    # test's, unmounted and checked with the rest.
    settings.STORAGES = settings.STORAGES | {
        "cloudstorage": {
            "BACKEND": "django.core.files.storage.FileSystemStorage",
            "OPTIONS": {"location": str(root / "cloud")},
        }
    }
    settings.LOCAL_AGENT_CONSOLE_URL = live_server.url
    settings.LOCAL_HEARTBEAT_SECONDS = 1
    settings.STORAGE_MAX_GB = TEST_STORAGE_MAX_GB
    Node.objects.update(backend_name="local")
    host = LocalHost(root)
    yield host
    _tear_down(host, request)


@pytest.fixture
def local_console(request, settings, monkeypatch, console_server, catalog):
    """Every node on the local backend for the console under uvicorn (``console_server``) and a worker process
    (``worker_process``, started by the test), with this test's own sandbox root: what the worker reads at start
    goes through the environment, the rest into this process's settings. Yields a :class:`LocalHost`; at the end
    every machine is killed and every home and cloud storage image it mounted is unmounted (the accounts' storage
    stays in the data folder, where the worker keeps it): as with ``on_local``, the test fails if a mount or loop
    device outlived its machines, and the sandbox root is removed unless the test failed."""
    why = local_unavailable()
    if why:
        pytest.skip(f"no local sandboxes here: {why}")
    root = Path(tempfile.mkdtemp(prefix="gpucloud-sbx-", dir="/tmp"))
    values = {
        "LOCAL_SANDBOX_ROOT": str(root),
        "LOCAL_AGENT_CONSOLE_URL": console_server.url,
        "LOCAL_HEARTBEAT_SECONDS": "1",
        "INSTANCES_STOP_GRACE_SECONDS": "1",
        "INSTANCES_RECONCILE_SECONDS": "2",
        "STORAGE_MAX_GB": str(TEST_STORAGE_MAX_GB),
    }
    for name, value in values.items():
        monkeypatch.setenv(name, value)  # the worker process reads them at start
    settings.LOCAL_SANDBOX_ROOT = root
    settings.LOCAL_HUB_ROOT = root / "hub"
    settings.LOCAL_AGENT_CONSOLE_URL = console_server.url
    settings.LOCAL_HEARTBEAT_SECONDS = 1
    settings.STORAGE_MAX_GB = TEST_STORAGE_MAX_GB
    Node.objects.update(backend_name="local")
    queue = Path(settings.DATA_DIR) / "broker" / "queue"
    for message in queue.glob("*") if queue.exists() else []:
        message.unlink(missing_ok=True)
    host = LocalHost(root, cloud=Path(settings.STORAGES["cloudstorage"]["OPTIONS"]["location"]))
    yield host
    _tear_down(host, request)


ON_LOCAL = pytest.param("local", marks=[pytest.mark.sandbox, pytest.mark.django_db(transaction=True)])


class LocalDriver:
    name = "local"
    chip = "ascend-910b"

    def __init__(self, host: LocalHost, owner):
        self.host = host
        self.owner = owner

    def settle(self, until=None, timeout=90.0) -> None:
        self.host.settle(until=until, timeout=timeout)

    def reclaim(self, instance) -> None:
        """The platform reclaims the spot instance's cards (the local host has no scheduler of its own)."""
        get_backend("local").preempt(instance, notice_seconds=0)
        lifecycle.preempt(Instance.objects.with_related().get(pk=instance.pk))
        self.host.settle(message="the spot instance to be preempted")

    def ease_pressure(self) -> None:
        """Nothing to give back: no other instance took the cards."""

    def lose(self, instance) -> None:
        """Every process of the machine dies outside the console (the OOM killer, an operator's kill)."""
        state = local.read_state(instance.public_id)

        for child in local._children(state["pid"]):
            os.kill(child, signal.SIGKILL)

    def has_system_disk(self, instance) -> bool:
        return self.host.home(instance).exists()

    def checkpointed(self, instance) -> bool:
        with self.host.stopped_home(instance) as home:
            return (home / ".gpucloud" / "checkpoint.json").exists()


@pytest.fixture
def running(on_local, launch):
    """Start a machine on the local backend (a 910B card unless told otherwise) and wait until it runs: returns a
    function that takes ``launch``'s fields and gives back the running instance."""

    def run(**fields):
        fields.setdefault("chip", "ascend-910b")
        fields.setdefault("cards", 1)
        instance = launch(**fields)

        def fresh():
            return Instance.objects.with_related().get(pk=instance.pk)

        on_local.settle(until=lambda: fresh().status == Status.RUNNING, message="the machine to run")
        return fresh()

    return run
