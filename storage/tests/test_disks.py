"""Cloud disks: zone-bound, one instance at a time (concurrent attempts too), hot-plug through the backend, grow
only, kept when an instance is released, following it to another node, billed per GB-day exactly."""

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
import time_machine
from django.db import connection

from billing import metering, wallet
from billing.models import LedgerTransaction, Notification, StoragePrice, UsageSession
from catalog.models import Node, Zone
from core.errors import Conflict, ServiceError
from instances import lifecycle
from instances.backends import BackendError
from instances.backends.simulated import SimulatedBackend
from instances.models import Instance, SimulatedJob
from instances.tests.fixtures import settle
from storage import charges as storage_charges
from storage import disks
from storage.choices import DiskReason, DiskStatus
from storage.models import CloudDisk
from tests.fixtures.concurrency import race

pytestmark = pytest.mark.usefixtures("owner_has_topped_up")

T0 = datetime(2026, 3, 2, 8, 0, tzinfo=UTC)


@pytest.fixture
def zone(catalog):
    return Zone.objects.get(slug="cn-east-xc")


@pytest.fixture
def running(launch):
    """A running 910B instance in the Xinchuang zone."""

    def make(name="train-1", **fields):
        instance = launch(name=name, zone="cn-east-xc", **fields)
        settle()
        instance.refresh_from_db()
        assert instance.status == "running"
        return instance

    return make


def _job(instance) -> SimulatedJob:
    return SimulatedJob.objects.get(instance_id=instance.public_id)


def test_a_disk_is_billed_per_gb_day_exactly_from_creation_to_deletion(owner, zone):
    with time_machine.travel(T0, tick=False):
        disk = disks.create(owner, name="data", size_gb=100, zone=zone)
    session = UsageSession.objects.get(resource_id=disk.public_id)
    assert session.kind == "disk" and session.payable_per_hour == Decimal("0.041667")
    with time_machine.travel(T0 + timedelta(days=1), tick=False):
        metering.meter()
    assert UsageSession.objects.get(pk=session.pk).charged == Decimal("1.00")  # 100 GB × ¥0.01 × 1 day
    with time_machine.travel(T0 + timedelta(days=30), tick=False):
        disks.delete(owner, disk.public_id)
    session.refresh_from_db()
    assert session.charged == Decimal("30.00") and session.ended_at == T0 + timedelta(days=30)
    assert not UsageSession.objects.open().filter(resource_id=disk.public_id).exists()


def test_the_disk_price_is_a_row_staff_can_change_for_new_disks(owner, zone):
    StoragePrice.objects.create(resource="disk", per_gb_day=Decimal("0.02"), effective_from=T0 - timedelta(days=1))
    with time_machine.travel(T0, tick=False):
        disk = disks.create(owner, name="data", size_gb=10, zone=zone)
        assert disks.price_of(10).per_month == Decimal("6.00")  # 10 GB × ¥0.02 × 30 days
    with time_machine.travel(T0 + timedelta(days=2), tick=False):
        metering.meter()
    assert UsageSession.objects.get(resource_id=disk.public_id).charged == Decimal("0.40")


def test_a_disk_only_grows_and_is_billed_at_the_new_size_from_the_next_minute(owner, zone):
    with time_machine.travel(T0, tick=False):
        disk = disks.create(owner, name="data", size_gb=100, zone=zone)
    with time_machine.travel(T0 + timedelta(days=1), tick=False):
        with pytest.raises(ServiceError) as smaller:
            disks.grow(owner, disk.public_id, 50)
        assert smaller.value.code == "grow_only"
        with pytest.raises(ServiceError):
            disks.grow(owner, disk.public_id, 100)
        disks.grow(owner, disk.public_id, 200)
    with time_machine.travel(T0 + timedelta(days=2), tick=False):
        disks.delete(owner, disk.public_id)
    charged = sum(s.charged for s in UsageSession.objects.filter(resource_id=disk.public_id))
    assert charged == Decimal("3.00")  # a day at 100 GB, a day at 200 GB
    assert CloudDisk.objects.get(pk=disk.pk).size_gb == 200
    assert disk.events.filter(reason=DiskReason.GROWN, detail="100 GB → 200 GB").exists()


@pytest.mark.parametrize("size", [0, -1, 40000, "ten", None, True, 1.5])
def test_bad_sizes_and_names_are_refused_with_a_message_and_nothing_is_written(owner, zone, size):
    with pytest.raises(ServiceError) as refused:
        disks.create(owner, name="data", size_gb=size, zone=zone)
    assert "GB" in str(refused.value.message)
    with pytest.raises(ServiceError):
        disks.create(owner, name="a/b", size_gb=10, zone=zone)
    assert not CloudDisk.objects.exists() and not UsageSession.objects.exists()


def test_hot_plug_attach_and_detach_on_a_running_instance_go_through_the_backend(owner, zone, running):
    instance = running()
    disk = disks.create(owner, name="data", size_gb=50, zone=zone)

    disks.attach(owner, disk.public_id, instance.public_id)
    disk.refresh_from_db()
    assert disk.status == DiskStatus.ATTACHED and disk.instance == instance
    assert _job(instance).disks == [str(disk.public_id)]  # the simulated machine has it now

    disks.detach(owner, disk.public_id)
    disk.refresh_from_db()
    assert disk.status == DiskStatus.AVAILABLE and disk.instance is None
    assert _job(instance).disks == []
    reasons = list(disk.events.values_list("reason", flat=True))
    assert reasons == ["created", "attach_requested", "attached", "detach_requested", "detached"]


def test_a_backend_refusal_undoes_a_detach_on_a_running_instance_and_is_deferred_on_a_stopped_one(
    owner, zone, running, monkeypatch, caplog
):

    def refuse(self, instance, disk_id):
        raise BackendError("no such device")

    instance = running()
    disk = disks.create(owner, name="data", size_gb=50, zone=zone, instance=instance)
    monkeypatch.setattr(SimulatedBackend, "detach_disk", refuse)
    with pytest.raises(ServiceError) as refused:
        disks.detach(owner, disk.public_id)
    assert refused.value.code == "backend_refused" and "no such device" in refused.value.message
    disk.refresh_from_db()
    assert disk.status == DiskStatus.ATTACHED and disk.instance == instance
    assert not disk.events.filter(reason=DiskReason.DETACH_REQUESTED).exists()

    lifecycle.stop(Instance.objects.with_related().get(pk=instance.pk))
    settle()
    with caplog.at_level("INFO", logger="instances.attachments"):
        disks.detach(owner, disk.public_id)
    disk.refresh_from_db()
    assert disk.status == DiskStatus.AVAILABLE and disk.instance is None
    assert "disk detach on" in caplog.text and "deferred to its start: no such device" in caplog.text


def test_a_disk_attached_to_a_stopped_instance_appears_at_its_next_start(owner, zone, running):
    instance = running()
    lifecycle.stop(instance)
    settle()
    instance.refresh_from_db()
    disk = disks.create(owner, name="data", size_gb=50, zone=zone, instance=instance)
    assert disk.status == DiskStatus.ATTACHED
    SimulatedJob.objects.filter(instance_id=instance.public_id).update(disks=[])  # as if the layout were lost

    lifecycle.start(instance)
    settle()
    assert _job(instance).disks == [str(disk.public_id)]


def test_a_disk_cannot_be_attached_to_two_instances(owner, zone, running):
    first, second = running("one"), running("two")
    disk = disks.create(owner, name="data", size_gb=50, zone=zone)
    disks.attach(owner, disk.public_id, first.public_id)
    with pytest.raises(Conflict) as refused:
        disks.attach(owner, disk.public_id, second.public_id)
    assert refused.value.code == "disk_in_use"
    assert CloudDisk.objects.get(pk=disk.pk).instance == first
    assert _job(second).disks == []


def test_a_disk_cannot_be_attached_across_zones(owner, running, catalog):
    instance = running()  # in the Xinchuang zone
    other = Zone.objects.get(slug="cn-east-a")
    disk = disks.create(owner, name="data", size_gb=50, zone=other)
    with pytest.raises(ServiceError) as refused:
        disks.attach(owner, disk.public_id, instance.public_id)
    assert refused.value.code == "other_zone" and refused.value.status == 400
    assert CloudDisk.objects.get(pk=disk.pk).status == DiskStatus.AVAILABLE


def test_an_attached_disk_cannot_be_deleted(owner, zone, running):
    instance = running()
    disk = disks.create(owner, name="data", size_gb=50, zone=zone, instance=instance)
    with pytest.raises(Conflict):
        disks.delete(owner, disk.public_id)
    assert UsageSession.objects.open().filter(resource_id=disk.public_id).exists()


def test_releasing_an_instance_keeps_its_data_disks(owner, zone, running):
    instance = running()
    disk = disks.create(owner, name="checkpoints", size_gb=200, zone=zone, instance=instance)

    lifecycle.release(instance)
    settle()

    instance.refresh_from_db()
    disk.refresh_from_db()
    assert instance.status == "released"
    assert disk.status == DiskStatus.AVAILABLE and disk.instance is None and disk.deleted_at is None
    assert disk.events.filter(reason=DiskReason.INSTANCE_RELEASED).exists()
    assert UsageSession.objects.open().filter(resource_id=disk.public_id).exists()  # still there, still billed
    # and it attaches to the next instance of the zone
    successor = running("successor")
    disks.attach(owner, disk.public_id, successor.public_id)
    assert _job(successor).disks == [str(disk.public_id)]


def test_a_disk_follows_its_instance_to_another_node_of_the_zone(owner, zone, running, launch):
    instance = running()
    disk = disks.create(owner, name="data", size_gb=50, zone=zone, instance=instance)
    home = instance.node
    lifecycle.stop(instance)
    settle()
    # Someone else fills the home node while it is stopped
    Node.objects.filter(pk=home.pk).update(cards_reserved=home.cards)

    instance.refresh_from_db()
    lifecycle.start(instance)
    settle()

    instance.refresh_from_db()
    assert instance.status == "running" and instance.node_id != home.pk
    assert _job(instance).node_id == instance.node_id
    assert _job(instance).disks == [str(disk.public_id)]
    assert CloudDisk.objects.get(pk=disk.pk).instance == instance


def _concurrent_attaches(owner, zone, running):
    instances = [running(f"racer-{i}") for i in range(4)]
    disk = disks.create(owner, name="contested", size_gb=50, zone=zone)
    results = race([lambda i=i: disks.attach(owner, disk.public_id, i.public_id) for i in instances])
    won = [r for r in results if isinstance(r, CloudDisk)]
    lost = [r for r in results if isinstance(r, Conflict)]
    assert len(won) == 1 and len(lost) == 3, results
    disk.refresh_from_db()
    assert disk.status == DiskStatus.ATTACHED and disk.instance_id == won[0].instance_id
    assert sum(len(_job(i).disks) for i in instances) == 1
    assert disk.events.filter(reason=DiskReason.ATTACHED).count() == 1


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_concurrent_attaches_of_one_disk_let_exactly_one_win_on_postgresql(owner, zone, running):
    assert connection.vendor == "postgresql"
    _concurrent_attaches(owner, zone, running)


@pytest.mark.django_db(transaction=True)
def test_concurrent_attaches_of_one_disk_let_exactly_one_win_on_sqlite(owner, zone, running):
    if connection.vendor != "sqlite":
        pytest.skip("the PostgreSQL run is the test above")
    _concurrent_attaches(owner, zone, running)


def test_a_launch_with_a_data_disk_creates_and_attaches_it(owner, launch, zone):
    instance = launch(zone="cn-east-xc", data_disk_gb=500)
    settle()
    disk = CloudDisk.objects.get(instance__pk=instance.pk)
    assert disk.size_gb == 500 and disk.name == "train-1-data" and disk.zone == zone
    assert _job(instance).disks == [str(disk.public_id)]


def test_the_arrears_mark_names_the_day_a_disk_is_kept_until(owner, zone, settings):

    settings.ARREARS_RETENTION_DAYS = 15
    with time_machine.travel(T0, tick=False):
        disk = disks.create(owner, name="data", size_gb=100, zone=zone)
        _pay_out(owner)
    with time_machine.travel(T0 + timedelta(days=3), tick=False):
        metering.meter()  # ¥3 charged from a cash balance of 0: the owner owes money now
        assert storage_charges.note_disk_arrears() == 1
        assert storage_charges.note_disk_arrears() == 0  # once
    disk.refresh_from_db()
    assert disk.arrears_since == T0 + timedelta(days=3)
    notice = disk.events.get(reason=DiskReason.ARREARS_NOTICE)
    assert "2026-03-20" in notice.detail
    assert [row["user_id"] for row in disks.owners_in_arrears()] == [owner.pk]
    assert LedgerTransaction.objects.filter(user=owner, kind="usage").exists()
    assert Instance.objects.count() == 0


# The end of the retention period in arrears (SPEC §5) ------------------------------------------------------------


def _pay_out(owner):
    """The owner's cash is paid back out, so the disks' next charges put them in debt."""
    cash = wallet.summary(owner).cash
    wallet.withdraw_cash(user=owner, amount=cash, idempotency_key=f"payout:{owner.pk}:{cash}")


def _in_arrears_from(owner, zone, settings, *, days=3):
    """A 100 GB disk created at T0, then the owner's cash paid out: after ``days`` the metering tick has put the
    owner in debt and the daily job has marked the disk."""

    settings.ARREARS_RETENTION_DAYS = 15
    with time_machine.travel(T0, tick=False):
        disk = disks.create(owner, name="data", size_gb=100, zone=zone)
        _pay_out(owner)
    with time_machine.travel(T0 + timedelta(days=days), tick=False):
        metering.meter()
        storage_charges.daily()
    disk.refresh_from_db()
    assert disk.kept_until == T0 + timedelta(days=days + 15)
    return disk


def _daily_at(when):

    with time_machine.travel(when, tick=False):
        metering.meter()
        return storage_charges.daily()["disks"]


def test_a_disk_left_in_arrears_is_deleted_when_retention_ends_after_two_reminders(owner, zone, settings):

    disk = _in_arrears_from(owner, zone, settings)  # kept until T0 + 18 days
    assert _daily_at(T0 + timedelta(days=14)) == {"reminded": 0, "deleted": 0, "kept_on_running_instances": 0}
    assert _daily_at(T0 + timedelta(days=15, hours=1))["reminded"] == 1  # 3 days left
    assert _daily_at(T0 + timedelta(days=15, hours=2))["reminded"] == 0  # once
    assert _daily_at(T0 + timedelta(days=17, hours=1))["reminded"] == 1  # 1 day left
    reminders = Notification.objects.filter(user=owner, kind="disk_reminder")
    assert reminders.count() == 2 and "2026-03-20" in reminders.first().message and "data" in reminders.first().message

    assert _daily_at(T0 + timedelta(days=18, hours=1))["deleted"] == 1
    disk.refresh_from_db()
    assert disk.status == DiskStatus.DELETED and disk.deleted_at == T0 + timedelta(days=18, hours=1)
    assert disk.events.filter(reason=DiskReason.ARREARS_EXPIRED).exists()
    # billing stopped with the deletion, and the owner was told
    session = UsageSession.objects.get(resource_id=disk.public_id)
    assert session.ended_at == T0 + timedelta(days=18, hours=1)
    assert "15 days" in Notification.objects.get(user=owner, kind="disk_deleted").message
    assert _daily_at(T0 + timedelta(days=19))["deleted"] == 0


def test_a_top_up_before_the_end_keeps_the_disk_and_clears_the_mark(owner, zone, settings):

    disk = _in_arrears_from(owner, zone, settings)
    assert _daily_at(T0 + timedelta(days=15, hours=1))["reminded"] == 1
    with time_machine.travel(T0 + timedelta(days=16), tick=False):
        wallet.adjust_balance(user=owner, amount=Decimal("100"), reason="top-up", staff=None, idempotency_key="t")
    assert _daily_at(T0 + timedelta(days=19))["deleted"] == 0
    disk.refresh_from_db()
    assert disk.status == DiskStatus.AVAILABLE and disk.arrears_since is None and disk.arrears_reminders_sent == 0


def test_a_disk_on_a_stopped_instance_is_detached_then_deleted_one_on_a_running_instance_is_kept(
    owner, zone, settings, running
):
    stopped_one, running_one = running(name="stopped-1"), running(name="running-1")
    lifecycle.stop(Instance.objects.with_related().get(pk=stopped_one.pk))
    settle()
    with time_machine.travel(T0, tick=False):
        other = disks.create(owner, name="scratch", size_gb=10, zone=zone)
    disk = _in_arrears_from(owner, zone, settings)
    with time_machine.travel(T0 + timedelta(days=4), tick=False):
        disks.attach(owner, disk.public_id, stopped_one.public_id)
        disks.attach(owner, other.public_id, running_one.public_id)
    CloudDisk.objects.filter(pk=other.pk).update(arrears_since=disk.arrears_since)

    outcome = _daily_at(T0 + timedelta(days=18, hours=1))
    assert outcome["deleted"] == 1 and outcome["kept_on_running_instances"] == 1
    disk.refresh_from_db(), other.refresh_from_db()
    assert disk.status == DiskStatus.DELETED and disk.instance is None
    reasons = [e.reason for e in disk.events.order_by("at", "pk")]
    last_two = reasons[-2:]
    assert last_two == [DiskReason.DETACHED, DiskReason.ARREARS_EXPIRED]
    assert reasons[-3] == DiskReason.DETACH_REQUESTED  # the same way as a user's detach
    assert [e.new for e in disk.events.order_by("at", "pk")][-3:] == [
        DiskStatus.DETACHING,
        DiskStatus.AVAILABLE,
        DiskStatus.DELETED,
    ]
    assert other.status == DiskStatus.ATTACHED and other.instance_id == running_one.pk


def test_the_disk_page_and_api_say_when_a_disk_in_arrears_will_be_deleted(
    owner, owner_client, owner_api, zone, settings
):
    disk = _in_arrears_from(owner, zone, settings)
    owner_client.cookies["django_language"] = "en"
    html = owner_client.get("/storage/disks/").content.decode()
    assert 'data-kept-until="2026-03-20"' in html and "deleted on 2026-03-20 unless you top up" in html
    data = owner_api.get(f"/api/v1/disks/{disk.public_id}").json()
    assert data["kept_until"].startswith("2026-03-20")
