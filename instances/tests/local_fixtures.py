"""Fixtures for the local backend: real bubblewrap sandboxes on this host.

``on_local`` points every node of the catalog at the local backend, gives the test its own sandbox root (so its
machines, homes and disks are told apart and cleaned up), starts a live console for the agents' reports, and
kills every machine of the test when it ends. Outside CI the tests skip where the host cannot run sandboxes.
"""

import shutil
import tempfile
from pathlib import Path

import pytest

from catalog.models import Node
from instances import services
from instances.backends import get_backend, local
from instances.models import Instance
from instances.tests.fixtures import settle_until


class LocalHost:
    """The test's view of its sandboxes."""

    def __init__(self, root: Path):
        self.root = root

    def folder(self, instance) -> Path:
        return self.root / "instances" / str(instance.public_id)

    def home(self, instance) -> Path:
        return self.folder(instance) / "root"

    def settle(self, until=None, timeout: float = 90.0, message: str = "the instances to settle") -> None:
        settle_until(until, timeout=timeout, message=message)

    def run(self, instance, command: str, timeout: float = 30) -> "subprocess.CompletedProcess":  # noqa: F821
        """``command`` run inside the instance, as an SSH session would run it."""
        import subprocess

        argv = get_backend("local").enter_argv(instance, command)
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)

    def kill_all(self) -> None:
        backend = get_backend("local")
        for path in (self.root / "instances").glob("*"):
            backend._kill(path.name, local.read_state(path.name))


def local_unavailable() -> str:
    ok, why = local.availability()
    return "" if ok else why


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
    settings.LOCAL_AGENT_CONSOLE_URL = live_server.url
    settings.LOCAL_HEARTBEAT_SECONDS = 1
    Node.objects.update(backend_name="local")
    host = LocalHost(root)
    yield host
    host.kill_all()
    report = getattr(request.node, "rep_call", None)
    if report is None or not report.failed:
        shutil.rmtree(root, ignore_errors=True)  # a failed test keeps its machines' logs


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
        services.preempt(Instance.objects.with_related().get(pk=instance.pk))
        self.host.settle(message="the spot instance to be preempted")

    def ease_pressure(self) -> None:
        """Nothing to give back: no other instance took the cards."""

    def lose(self, instance) -> None:
        """Every process of the machine dies outside the console (the OOM killer, an operator's kill)."""
        state = local.read_state(instance.public_id)
        import os
        import signal

        for child in local._children(state["pid"]):
            os.kill(child, signal.SIGKILL)

    def has_system_disk(self, instance) -> bool:
        return self.host.home(instance).exists()

    def checkpointed(self, instance) -> bool:
        return (self.host.home(instance) / ".gpucloud" / "checkpoint.json").exists()
