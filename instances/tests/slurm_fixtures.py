"""Fixtures for the Slurm backend against the real local cluster (``scripts/slurm-local.sh start``).

``on_slurm`` points the Xinchuang zone's MLU370 and 910B nodes at the Slurm backend, gives this test its own job
name prefix and instance root (so its jobs and directories are told apart and cleaned up), starts a live console
for the agents' reports, and cancels every job of the test when it ends so the next test finds the cards free.
Each owner's jobs run as their own unix account, ``gpctest-u<owner id>``, which the console creates (the tests run
as root, as CI does) and the fixture deletes afterwards.
"""

import fcntl
import os
import pwd
import re
import shutil
import subprocess
import time
import uuid
from pathlib import Path

import pytest
from django.conf import settings as django_settings

from catalog.models import Node
from instances import launching
from instances import lifecycle as instance_lifecycle
from instances.backends import get_backend, simulated
from instances.backends.slurm import ENDED_STATES, SlurmClient
from instances.models import Instance, SimulatedJob
from instances.tests.fixtures import settle, settle_until
from instances.tests.local_fixtures import ON_LOCAL, LocalDriver

SLURM_CHIPS = ["mlu370-x8", "ascend-910b"]
TEST_ACCOUNTS = "gpctest-u"
TEST_UID_BASE = 1_600_000_000
TEST_JOB = re.compile(r"^t[0-9a-f]{6}-")


class SlurmCluster:
    """The test's view of the cluster: its jobs, and waiting for the console to catch up."""

    def __init__(self, config: dict):
        self.config = config
        # As SlurmUser, an operator: the test cancels jobs of every owner's account.
        self.client = SlurmClient(config | {"user": "slurm"})
        self.prefix = config["job_prefix"]
        self.root = Path(config["root"])

    def jobs(self) -> list[dict]:
        return [j for j in self.client.jobs() if j.get("name", "").startswith(self.prefix)]

    def job_of(self, instance) -> dict | None:
        mine = [j for j in self.jobs() if j["name"] == f"{self.prefix}{instance.public_id}"]
        return max(mine, key=lambda j: j["job_id"]) if mine else None

    def system_disk(self, instance) -> Path:
        return self.root / "instances" / str(instance.public_id)

    def marker(self, instance) -> Path:
        return self.system_disk(instance) / "root" / ".gpucloud" / "checkpoint.json"

    def settle(self, until=None, timeout: float = 60.0, message: str = "the instances to settle") -> None:
        """Run reconcile beats until ``until()`` holds, or without it until nothing is on its way somewhere."""
        settle_until(until, timeout=timeout, message=message, describe=lambda: f"; jobs: {self._job_summary()}")

    def _job_summary(self):
        mine = [(j["job_id"], j["name"][-8:], j["job_state"], j["state_reason"]) for j in self.jobs()]
        # Cards held by anyone else are what a waiting launch waits for: name them too.
        others = [
            (j["job_id"], j.get("name"), j.get("user_name") or j.get("user_id"), j["job_state"], j.get("gres_detail"))
            for j in self.client.jobs()
            if not j.get("name", "").startswith(self.prefix) and j["job_state"] not in ENDED_STATES
        ]
        return f"{mine}; other jobs on the cluster: {others}"

    def cancel_all(self, timeout: float = 60.0, jobs=None) -> None:
        """Cancel every job of this test (or ``jobs()``'s) and wait until none holds cards; fail naming those that
        still do, so the test that left them is the one that says so, not the next one waiting for its cards."""
        jobs = jobs or self.jobs
        for job in jobs():
            if job["job_state"] not in ENDED_STATES:
                self.client.cancel(job["job_id"])
        deadline = time.monotonic() + timeout
        while True:
            left = [j for j in jobs() if j["job_state"] not in ENDED_STATES]
            if not left:
                return
            if time.monotonic() > deadline:
                break
            time.sleep(0.2)
        summary = [(j["job_id"], j["name"], j["job_state"], j.get("gres_detail")) for j in left]
        raise AssertionError(f"jobs still hold cards {timeout:.0f} s after they were cancelled: {summary}")

    def leftovers(self) -> list[dict]:
        """Jobs that earlier tests started (their prefixes are ``t`` and six hex digits) and that have not ended."""
        jobs = self.client.jobs()
        return [j for j in jobs if TEST_JOB.match(j.get("name", "")) and j["job_state"] not in ENDED_STATES]


def _own_root(parent: Path) -> Path:
    """A fresh root under the cluster's, owned like it: the jobs' user must write there."""
    root = parent / f"test-{uuid.uuid4().hex[:8]}"
    root.mkdir()
    owner = parent.stat()
    os.chown(root, owner.st_uid, owner.st_gid)
    root.chmod(0o2775)
    return root


@pytest.fixture
def _slurm_lock():
    """An exclusive lock on the cluster for the test's lifetime (``flock``: released if the process dies)."""
    with open(Path(django_settings.SLURM["root"]) / ".tests.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield lock


@pytest.fixture
def on_slurm(request, settings, catalog, _slurm_lock):
    """The Xinchuang zone's MLU370 and 910B nodes on the real cluster; yields a :class:`SlurmCluster`."""
    # ``_slurm_lock``: one test at a time on the cluster, across test processes too (two checkouts share
    # scripts/slurm-local.sh's), so a job of a test prefix that has not ended belongs to no test still running.
    live_server = request.getfixturevalue("live_server")
    root = _own_root(Path(django_settings.SLURM["root"]))
    settings.SLURM = {
        **django_settings.SLURM,
        "console_url": live_server.url,
        "job_prefix": f"t{uuid.uuid4().hex[:6]}-",
        "root": str(root),
        "heartbeat_seconds": 2,
        "job_user_template": TEST_ACCOUNTS + "{owner}",
        "job_uid_base": TEST_UID_BASE,
    }
    accounts_before = _test_accounts()
    Node.objects.filter(zone__slug="cn-east-xc", chip__slug__in=SLURM_CHIPS).update(backend_name="slurm")
    get_backend("slurm")  # the registry's shared instance: its clients follow the settings per call
    cluster = SlurmCluster(settings.SLURM)
    try:  # what an earlier test left behind would hold this one's cards
        cluster.cancel_all(jobs=cluster.leftovers)
    except AssertionError:
        shutil.rmtree(root, ignore_errors=True)
        raise
    yield cluster
    try:
        cluster.cancel_all()
    finally:
        _delete_accounts(_test_accounts() - accounts_before)
    report = getattr(request.node, "rep_call", None)
    if report is None or not report.failed:
        shutil.rmtree(root, ignore_errors=True)  # a failed test keeps its jobs' logs under logs/


def _delete_accounts(names, timeout: float = 15.0) -> None:
    """userdel refuses while a process of the account lives: what a cancelled job started may take a moment."""
    deadline = time.monotonic() + timeout
    for name in names:
        while subprocess.run(["userdel", name], capture_output=True, check=False).returncode == 8:
            if time.monotonic() > deadline:
                break
            time.sleep(0.2)
        subprocess.run(["groupdel", name], capture_output=True, check=False)


def _test_accounts() -> set[str]:
    return {entry.pw_name for entry in pwd.getpwall() if entry.pw_name.startswith(TEST_ACCOUNTS)}


ON_SLURM = pytest.param("slurm", marks=[pytest.mark.slurm, pytest.mark.django_db(transaction=True)])


@pytest.fixture(params=[pytest.param("simulated", marks=pytest.mark.django_db), ON_SLURM, ON_LOCAL])
def driver(request, lifecycle):
    """The same lifecycle tests on each backend: ``driver.settle()``, ``driver.reclaim(spot)``, …"""
    if request.param == "slurm":
        return SlurmDriver(request.getfixturevalue("on_slurm"), request.getfixturevalue("owner"))
    if request.param == "local":
        return LocalDriver(request.getfixturevalue("on_local"), request.getfixturevalue("owner"))
    return SimulatedDriver()


class SimulatedDriver:
    name = "simulated"
    chip = "ascend-910b"

    def settle(self, until=None, timeout=None) -> None:
        settle()
        assert until is None or until()

    def reclaim(self, instance) -> None:

        simulated.preempt(instance, notice_seconds=0)
        settle()

    def ease_pressure(self) -> None:
        """Nothing to give back: the simulated preemption took no cards for anyone else."""

    def lose(self, instance) -> None:

        simulated.crash_node(instance.node)

    def has_system_disk(self, instance) -> bool:

        return SimulatedJob.objects.filter(instance_id=instance.public_id, released_at__isnull=True).exists()

    def checkpointed(self, instance) -> bool:

        return SimulatedJob.objects.filter(instance_id=instance.public_id, signalled_at__isnull=False).exists()


class SlurmDriver:
    name = "slurm"
    chip = "mlu370-x8"

    def __init__(self, cluster: SlurmCluster, owner):
        self.cluster = cluster
        self.owner = owner
        self.pressure = None

    def settle(self, until=None, timeout=90.0) -> None:
        self.cluster.settle(until=until, timeout=timeout)

    def reclaim(self, instance) -> None:
        """An on-demand launch that needs the spot instance's cards: Slurm preempts it."""
        request = launching.LaunchRequest(name="on-demand", chip=self.chip, cards=2, image="pytorch-2.2-neuware")
        self.pressure = launching.launch(self.owner, request)
        self.cluster.settle(
            until=lambda: (
                Instance.objects.get(pk=instance.pk).status == "preempted"
                and Instance.objects.get(pk=self.pressure.pk).status == "running"
            ),
            message="the spot instance to be preempted",
        )

    def ease_pressure(self) -> None:
        if self.pressure is not None:
            instance_lifecycle.release(Instance.objects.with_related().get(pk=self.pressure.pk))
            self.cluster.settle(message="the on-demand instance to be released")
            self.cluster.settle(until=lambda: not [j for j in self.cluster.jobs() if j["job_state"] == "COMPLETING"])

    def lose(self, instance) -> None:
        """The job dies outside the console (an operator's scancel, a crashed node)."""
        self.cluster.client.cancel(self.cluster.job_of(instance)["job_id"])

    def has_system_disk(self, instance) -> bool:
        return self.cluster.system_disk(instance).exists()

    def checkpointed(self, instance) -> bool:
        return self.cluster.marker(instance).exists()
