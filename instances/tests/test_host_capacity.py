"""Host capacity and account limits: CPU and memory are reserved at launch like cards and never oversold (on a
node, or on the local backend's one host), and one account holds at most so many machines, so many of them
CPU-only. Refusals say which resource or which limit, on the page and in the API."""

import os
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.conf import settings as django_settings
from django.db import IntegrityError, connection, transaction
from django.db.models import F
from django.test import Client
from django.urls import reverse

from accounts.models import AuditEntry
from catalog.models import Node, Zone
from core.errors import ServiceError
from instances import launching, lifecycle
from instances import lifecycle as instance_lifecycle
from instances.backends import local
from instances.capacity import CapacityError
from instances.choices import Status
from instances.limits import LimitReached
from instances.models import AccountLimit, HostLoad, Instance
from instances.tests.fixtures import settle
from teams import services as team_services

pytestmark = pytest.mark.django_db

CPU_ONLY = {"no_card": True, "image": "ubuntu-22.04", "zone": "cn-east-a"}


@pytest.fixture
def roomy_limits(settings):
    """Limits out of the way, for the tests of host capacity."""
    settings.ACCOUNT_MAX_MACHINES = settings.ACCOUNT_MAX_CPU_ONLY = 1000


def _launch(owner, name="m", **fields):
    return launching.launch(owner, launching.LaunchRequest(name=name, **(fields or CPU_ONLY)))


def _launch_until_refused(owner, limit=50, **fields):
    launched = []
    for i in range(limit):
        try:
            launched.append(_launch(owner, f"m{i}", **fields))
        except ServiceError as exc:
            return launched, exc
    raise AssertionError(f"{limit} launches and none refused")


def _zone_nodes(slug="cn-east-a"):
    return Node.objects.filter(zone=Zone.objects.get(slug=slug))


# The simulated backend: each node has its own vCPUs and memory ----------------------------------------------


def test_cpu_only_launches_past_the_zones_cores_are_refused_naming_cpu(owner, lifecycle, roomy_limits):
    nodes = _zone_nodes()
    nodes.update(vcpus=4)  # the CPU-only spec has 2 vCPUs: two machines a node
    launched, refused = _launch_until_refused(owner)
    assert len(launched) == 2 * nodes.count()
    assert isinstance(refused, CapacityError) and refused.code == "no_cpu" and refused.status == 503
    assert "Not enough CPU" in str(refused.message) and "needs 2 vCPUs and 0 of 4 are free" in str(refused.message)
    assert not Node.objects.filter(cpu_millis_reserved__gt=F("vcpus") * 1000).exists()
    assert sum(nodes.values_list("cpu_millis_reserved", flat=True)) == 2000 * len(launched)

    settle()
    instance_lifecycle.stop(
        Instance.objects.get(pk=launched[0].pk)
    )  # a stopped machine gives its CPU back, as it gives back its cards
    settle()
    assert Instance.objects.get(pk=launched[0].pk).reserved_cpu_millis == 0
    _launch(owner, "after-a-stop")
    with pytest.raises(CapacityError):
        instance_lifecycle.start(Instance.objects.get(pk=launched[0].pk))  # its place was taken meanwhile


def test_cpu_only_launches_past_the_zones_memory_are_refused_naming_memory(owner, lifecycle, roomy_limits):
    nodes = _zone_nodes()
    nodes.update(memory_gb=16)  # the CPU-only spec has 8 GB: two machines a node
    launched, refused = _launch_until_refused(owner)
    assert len(launched) == 2 * nodes.count()
    assert isinstance(refused, CapacityError) and refused.code == "no_memory"
    assert "Not enough memory" in str(refused.message) and "needs 8192 MB" in str(refused.message)


def test_a_card_machine_needs_its_vcpus_too(owner, lifecycle, roomy_limits):
    # One A800 node of 8 cards but 24 vCPUs: a 1-card machine holds 12, so the third is refused with cards free.
    nodes = Node.objects.filter(chip__slug="a800-80g")
    nodes.update(vcpus=24)
    launched, refused = _launch_until_refused(owner, chip="a800-80g", image="pytorch-2.2-cuda12")
    assert len(launched) == 2 * nodes.count()
    assert refused.code == "no_cpu" and "Not enough CPU" in str(refused.message)
    assert all(node.cards_free == 6 for node in nodes)


def test_release_frees_cpu_and_memory(owner, lifecycle, roomy_limits):
    instance = _launch(owner)
    settle()
    node = Node.objects.get(pk=Instance.objects.get(pk=instance.pk).node_id)
    assert (node.cpu_millis_reserved, node.memory_mb_reserved) == (2000, 8192)
    instance_lifecycle.release(Instance.objects.get(pk=instance.pk))
    settle()
    node.refresh_from_db()
    assert (node.cpu_millis_reserved, node.memory_mb_reserved) == (0, 0)


def test_the_database_refuses_an_oversold_node_cpu_or_memory(catalog):

    node = Node.objects.first()
    with pytest.raises(IntegrityError), transaction.atomic():
        Node.objects.filter(pk=node.pk).update(cpu_millis_reserved=node.vcpus * 1000 + 1)
    with pytest.raises(IntegrityError), transaction.atomic():
        Node.objects.filter(pk=node.pk).update(memory_mb_reserved=node.memory_gb * 1024 + 1)


# The local backend: every node is this host; each machine holds its cgroup limits -----------------------------


@pytest.fixture
def on_local_host(settings, lifecycle, roomy_limits):
    """Every node on the local backend (no machine is started: nothing runs the provisioning tasks here)."""
    Node.objects.update(backend_name="local")
    settings.LOCAL_CPUS, settings.LOCAL_MEMORY_MB = 1.0, 256
    settings.LOCAL_HOST_CPUS, settings.LOCAL_HOST_MEMORY_MB, settings.LOCAL_CONSOLE_CPUS = 0, 0, 0
    return settings


def _meminfo_total_mb() -> int:
    for line in open("/proc/meminfo"):
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) // 1024
    raise AssertionError("no MemTotal")


def test_the_local_host_capacity_is_nproc_and_memtotal_less_the_consoles_share(settings):
    settings.LOCAL_HOST_CPUS = settings.LOCAL_HOST_MEMORY_MB = 0
    settings.LOCAL_CONSOLE_CPUS, settings.LOCAL_CONSOLE_MEMORY_MB = 0.5, 2048
    nproc = len(os.sched_getaffinity(0))
    assert local.host_capacity() == (nproc * 1000 - 500, _meminfo_total_mb() - 2048)


def test_local_cpu_only_launches_past_the_hosts_cores_are_refused(owner, on_local_host):
    nproc = len(os.sched_getaffinity(0))
    launched, refused = _launch_until_refused(owner)
    assert len(launched) == nproc  # one CPU each (LOCAL_CPUS), on every core this host has
    assert refused.code == "no_cpu"
    assert f"Not enough CPU on the host for this machine: it needs 1 vCPUs and 0 of {nproc} are free" in str(
        refused.message
    )
    assert HostLoad.objects.get(backend_name="local").cpu_millis_reserved == nproc * 1000
    # the local nodes themselves hold no CPU: the host is counted once, not once a node
    assert not Node.objects.filter(cpu_millis_reserved__gt=0).exists()


def test_local_card_machines_share_the_hosts_memory_and_stop_frees_it(owner, on_local_host):
    on_local_host.LOCAL_HOST_CPUS = 16
    on_local_host.LOCAL_HOST_MEMORY_MB, on_local_host.LOCAL_CONSOLE_MEMORY_MB = 2048 + 512, 2048
    first = _launch(owner, "a", chip="mlu370-x8", image="pytorch-2.2-neuware")
    _launch(owner, "b", chip="a800-80g", image="pytorch-2.2-cuda12")  # another chip, another node, same host
    with pytest.raises(CapacityError) as refused:
        _launch(owner, "c")
    assert refused.value.code == "no_memory"
    assert "Not enough memory on the host for this machine: it needs 256 MB and 0 of 512 MB are free" in str(
        refused.value.message
    )
    # a machine that never got going (as stop does once the machine is down) gives its memory back
    lifecycle._fail(first, "submit_failed")
    assert HostLoad.objects.get(backend_name="local").memory_mb_reserved == 256
    _launch(owner, "c")
    assert Node.objects.filter(cards_reserved__gt=0).count() == 1  # the failed one's cards went back too


# Account limits -------------------------------------------------------------------------------------------------


def test_the_fourth_cpu_only_machine_is_refused_by_the_default_limit(owner, lifecycle, settings):
    settings.LIMITS_CONTACT = "support@example.com"
    launched, refused = _launch_until_refused(owner)
    assert len(launched) == settings.ACCOUNT_MAX_CPU_ONLY == 3
    assert isinstance(refused, LimitReached) and refused.status == 403 and refused.code == "cpu_only_limit"
    assert str(refused.message) == (
        "This account already runs 3 CPU-only machines, its limit of CPU-only machines at once (3). Stop one, or "
        "ask the operator to raise the limit (support@example.com)."
    )
    # a machine with cards still fits under the limit of machines
    _launch(owner, "with-cards", chip="mlu370-x8", image="pytorch-2.2-neuware")


def test_the_limit_of_machines_counts_every_machine_until_it_stops(owner, lifecycle):
    AccountLimit.objects.create(max_machines=2)  # the operator's default for everyone
    first = _launch(owner, "a", chip="mlu370-x8", image="pytorch-2.2-neuware")
    _launch(owner, "b")
    with pytest.raises(LimitReached) as refused:
        _launch(owner, "c", chip="mlu370-x8", image="pytorch-2.2-neuware")
    assert refused.value.code == "machine_limit"
    assert "already runs 2 machines, its limit of machines at once (2)" in str(refused.value.message)
    assert "ask the operator to raise the limit." in str(refused.value.message)
    settle()
    instance_lifecycle.stop(Instance.objects.get(pk=first.pk))
    settle()
    _launch(owner, "c", chip="mlu370-x8", image="pytorch-2.2-neuware")
    with pytest.raises(LimitReached):
        instance_lifecycle.start(Instance.objects.get(pk=first.pk))  # starting again counts like a launch


def test_an_accounts_own_limit_raises_the_default_for_it_only(owner, stranger, lifecycle):
    AccountLimit.objects.create(max_cpu_only=1)
    AccountLimit.objects.create(account=owner, max_cpu_only=2)
    _launch(owner, "a")
    _launch(owner, "b")
    _launch(stranger, "a")
    with pytest.raises(LimitReached):
        _launch(stranger, "b")


def test_a_teams_account_has_the_limit_whoever_launches(owner, lifecycle, settings):

    settings.ACCOUNT_MAX_CPU_ONLY = 1
    team = team_services.create_team(owner, name="Lab", slug="lab")
    account = team.account
    launching.launch(account, launching.LaunchRequest(name="a", **CPU_ONLY), by=owner)
    with pytest.raises(LimitReached):
        launching.launch(account, launching.LaunchRequest(name="b", **CPU_ONLY), by=owner)
    _launch(owner, "personal")  # the person's own account is another account


# What users see -------------------------------------------------------------------------------------------------


def test_the_api_answers_a_limit_with_403_and_the_message(owner, owner_api, lifecycle, settings):
    settings.ACCOUNT_MAX_CPU_ONLY = 1
    body = {"name": "api", "no_card": True, "image": "ubuntu-22.04", "zone": "cn-east-a"}
    assert owner_api.post("/api/v1/instances", body, format="json").status_code == 201
    response = owner_api.post("/api/v1/instances", body | {"name": "api-2"}, format="json", HTTP_ACCEPT_LANGUAGE="en")
    assert response.status_code == 403
    assert response.json()["code"] == "cpu_only_limit"
    assert "its limit of CPU-only machines at once (1)" in response.json()["message"]


def test_the_api_answers_a_full_host_with_503_naming_cpu(owner_api, lifecycle, roomy_limits):
    _zone_nodes().update(vcpus=1)  # no room for a 2-vCPU machine anywhere in the zone
    body = {"name": "api", "no_card": True, "image": "ubuntu-22.04", "zone": "cn-east-a"}
    response = owner_api.post("/api/v1/instances", body, format="json", HTTP_ACCEPT_LANGUAGE="en")
    assert response.status_code == 503 and response.json()["code"] == "no_cpu"
    assert "Not enough CPU on any node of the zone" in response.json()["message"]


WIZARD = {
    "no_card": "on",
    "cards": "1",
    "zone": "cn-east-a",
    "plan": "payg",
    "image": "ubuntu-22.04",
    "name": "page",
    "term_end_action": "continue",
}


@pytest.fixture
def english(owner_client):
    owner_client.cookies[django_settings.LANGUAGE_COOKIE_NAME] = "en"
    return owner_client


def test_the_wizard_shows_the_limit(english, lifecycle, settings):
    settings.ACCOUNT_MAX_CPU_ONLY = 1
    assert english.post(reverse("instances:launch"), WIZARD).status_code == 302
    html = english.post(reverse("instances:launch"), WIZARD | {"name": "page-2"}).content.decode()
    assert "its limit of CPU-only machines at once (1)" in html
    assert Instance.objects.count() == 1


def test_the_wizard_shows_a_full_host_in_chinese(owner_client, lifecycle, roomy_limits):
    _zone_nodes().update(memory_gb=4)
    owner_client.cookies[django_settings.LANGUAGE_COOKIE_NAME] = "zh-hans"
    html = owner_client.post(reverse("instances:launch"), WIZARD).content.decode()
    assert "内存不足" in html
    assert not Instance.objects.exists()


# Concurrency ----------------------------------------------------------------------------------------------------


def _race(owner, count: int, threads: int) -> list:
    def one(i):
        try:
            return _launch(owner, f"race-{i}")
        except ServiceError as exc:
            return exc
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=threads) as pool:
        return list(pool.map(one, range(count)))


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_concurrent_cpu_only_launches_never_pass_the_account_limit_on_postgresql(owner, lifecycle, settings):
    settings.ACCOUNT_MAX_CPU_ONLY = 5
    lifecycle.balances[owner.pk] = 10_000  # funded before the race: only the launches' own locks order them
    results = _race(owner, 40, threads=20)
    won = [r for r in results if isinstance(r, Instance)]
    assert len(won) == 5
    assert all(isinstance(r, LimitReached) for r in results if not isinstance(r, Instance))
    assert Instance.objects.count() == 5


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_concurrent_launches_never_oversell_the_local_host_on_postgresql(owner, on_local_host):
    on_local_host.LOCAL_HOST_CPUS = 6
    results = _race(owner, 40, threads=20)
    won = [r for r in results if isinstance(r, Instance)]
    assert len(won) == 6
    assert all(isinstance(r, CapacityError) and r.code == "no_cpu" for r in results if not isinstance(r, Instance))
    assert HostLoad.objects.get(backend_name="local").cpu_millis_reserved == 6000
    assert sum(Instance.objects.values_list("reserved_cpu_millis", flat=True)) == 6000


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_concurrent_launches_never_oversell_a_nodes_cpu_on_postgresql(owner, lifecycle, roomy_limits):
    nodes = _zone_nodes()
    nodes.update(vcpus=4)
    results = _race(owner, 40, threads=20)
    assert len([r for r in results if isinstance(r, Instance)]) == 2 * nodes.count()
    assert not Node.objects.filter(cpu_millis_reserved__gt=F("vcpus") * 1000).exists()


# The operator's page ------------------------------------------------------------------------------------------


def test_the_operator_sets_the_default_limit_in_the_back_office_and_it_is_audited(owner, superuser, lifecycle):

    staff = Client()
    staff.cookies[django_settings.LANGUAGE_COOKIE_NAME] = "en"
    staff.force_login(superuser)
    response = staff.post(reverse("admin:instances_accountlimit_add"), {"max_machines": "", "max_cpu_only": "1"})
    assert response.status_code == 302, response.content.decode()[:2000]
    _launch(owner, "a")
    with pytest.raises(LimitReached) as refused:
        _launch(owner, "b")
    assert "its limit of CPU-only machines at once (1)" in str(refused.value.message)
    entry = AuditEntry.objects.get(action="account_limit_set")
    assert entry.after["max_cpu_only"] == 1 and entry.actor_email == superuser.email


# A real sandbox ---------------------------------------------------------------------------------------------------


@pytest.mark.sandbox
@pytest.mark.django_db(transaction=True)
def test_a_real_sandbox_holds_the_hosts_last_core_until_it_stops(owner, on_local, launch, settings):

    settings.LOCAL_HOST_CPUS, settings.LOCAL_CONSOLE_CPUS, settings.LOCAL_CPUS = 1, 0, 1.0
    first = launch(name="first", **CPU_ONLY)
    on_local.settle(until=lambda: Instance.objects.get(pk=first.pk).status == Status.RUNNING, message="it to run")
    with pytest.raises(CapacityError) as refused:
        launch(name="second", **CPU_ONLY)
    assert refused.value.code == "no_cpu" and "0 of 1 are free" in str(refused.value.message)

    instance_lifecycle.stop(Instance.objects.get(pk=first.pk))
    on_local.settle(until=lambda: Instance.objects.get(pk=first.pk).status == Status.STOPPED, message="it to stop")
    second = launch(name="second", **CPU_ONLY)
    on_local.settle(until=lambda: Instance.objects.get(pk=second.pk).status == Status.RUNNING, message="it to run")
