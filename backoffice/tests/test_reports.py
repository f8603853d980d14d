"""The back office's numbers: the subsidy reconciliation CSV adds up to what the ledger booked against the
programmes, revenue comes from the ledger, capacity from the nodes, and the pages' query counts do not grow."""

import csv
import io
import uuid
from datetime import timedelta
from decimal import Decimal

import pytest
import time_machine
from django.db import connection
from django.db.models import Sum
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from accounts import verification
from accounts.ops.audit import Actor
from accounts.ops.models import AuditEntry, CapacitySnapshot
from backoffice import reports, services
from backoffice.tasks import record_capacity_snapshot
from billing import ledger, metering
from billing.choices import AccountKind
from billing.models import LedgerEntry, LedgerTransaction, SubsidyProgramme
from catalog.models import Node
from instances import launching
from instances import lifecycle as instance_lifecycle
from instances.models import Instance
from instances.tests.fixtures import settle
from storage import charges as storage_charges
from storage import quota
from storage.models import Entry
from tests.fixtures.factories import UserFactory

pytestmark = pytest.mark.django_db


def _run(user, name, chip="ascend-910b", plan="payg", image="pytorch-2.2-cann8"):
    request = launching.LaunchRequest(name=name, chip=chip, image=image, plan=plan)
    return launching.launch(user, request)


@pytest.fixture
def subsidised_month(owner, stranger, fund, catalog, instant):
    """Two users' runs over two days: subsidised 910B per-minute runs, a daily plan paid up front, an
    unsubsidised NVIDIA run, and a day of storage beyond the free tier. Returns the month."""
    for user in (owner, stranger):
        fund(user, "3000")
    start = timezone.localtime().replace(day=1, hour=9, minute=0, second=0, microsecond=0)
    with time_machine.travel(start, tick=False) as clock:
        _run(owner, "train-a")
        _run(stranger, "train-b", plan="daily")
        _run(stranger, "infer", chip="a800-80g", image="pytorch-2.2-cuda12")
        settle()
        for _hour in range(6):
            clock.shift(timedelta(minutes=47))
            metering.meter()
        clock.shift(timedelta(days=1))
        _run(owner, "train-c")
        settle()
        for _hour in range(3):
            clock.shift(timedelta(minutes=61))
            metering.meter()
        for instance in Instance.objects.with_related().filter(status="running"):
            instance_lifecycle.stop(instance)
        settle()
        Entry.objects.create(owner=owner, kind="file", name="weights.bin", path="/weights.bin", size=80 * quota.GB)
        assert storage_charges.charge_day(now=timezone.now()) == 1
    return start.date()


def _csv(client, month):
    response = client.get(reverse("ops:reconciliation-csv"), {"month": f"{month:%Y-%m}"})
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    return list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))


def test_the_subsidy_csv_adds_up_to_the_subsidy_the_ledger_booked(client, finance_user, subsidised_month):
    client.force_login(finance_user)
    rows = _csv(client, subsidised_month)
    lines, total = rows[:-1], rows[-1]

    booked = -LedgerEntry.objects.filter(account__kind=AccountKind.SUBSIDY).aggregate(t=Sum("amount"))["t"]
    assert booked > 0
    assert sum(Decimal(r["subsidy_cny"]) for r in lines) == Decimal(total["subsidy_cny"]) == booked
    assert booked == SubsidyProgramme.objects.get(slug="xinchuang-2026").spent
    assert booked == reports.ledger_subsidy_total(subsidised_month)
    # Per user, per instance, per day; nothing unsubsidised (the A800 run) is claimed
    assert {r["user"] for r in lines} == {"owner@example.com", "stranger@example.com"}
    assert len({r["day"] for r in lines}) == 2
    assert "infer" not in {r["instance"] for r in lines}
    for r in lines:
        assert Decimal(r["list_price_cny"]) >= Decimal(r["payable_cny"]) + Decimal(r["subsidy_cny"]) - Decimal("0.01")
    assert ledger.check() == []


def test_the_csv_of_a_month_without_subsidy_has_only_the_header_and_a_zero_total(client, finance_user):
    client.force_login(finance_user)
    rows = _csv(client, timezone.localdate().replace(year=2020, day=1))
    assert rows == [
        {
            "day": "total",
            "programme": "",
            "user": "",
            "instance_id": "",
            "instance": "",
            "billed_minutes": "0",
            "list_price_cny": "0",
            "subsidy_cny": "0",
            "payable_cny": "0",
        }
    ]


def test_a_bad_month_gets_a_message_not_an_error(client, finance_user):
    client.force_login(finance_user)
    response = client.get(reverse("ops:reconciliation-csv"), {"month": "2026-13"}, follow=True)
    assert response.status_code == 200 and "Choose a month" in response.content.decode()


def test_revenue_is_what_users_paid_plus_what_programmes_paid_split_by_chip_zone_and_plan(subsidised_month):
    with time_machine.travel(
        timezone.make_aware(timezone.datetime.combine(subsidised_month, timezone.datetime.min.time()))
        + timedelta(days=2)
    ):  # noqa: E501
        report = reports.revenue()
    chips = dict(report.by_chip)
    assert report.month.subsidy == reports.ledger_subsidy_total(subsidised_month)
    assert chips["a800-80g"].subsidy == 0 and chips["ascend-910b"].subsidy > 0
    assert sum((m.revenue for _k, m in report.by_chip), Decimal(0)) == report.month.revenue
    assert sum((m.revenue for _k, m in report.by_plan), Decimal(0)) == report.month.revenue
    assert sum((m.revenue for _k, m in report.by_zone), Decimal(0)) == report.month.revenue
    storage = -LedgerTransaction.objects.get(kind="storage").user_amount
    assert storage > 0
    for breakdown in (report.by_chip, report.by_zone, report.by_plan):
        assert dict(breakdown)["storage"].revenue == storage
    assert dict(report.by_plan)["daily"].payable > 0


def test_capacity_counts_cards_per_zone_and_chip_from_the_nodes(ops_user, launch, lifecycle):
    launch(chip="ascend-910b", cards=2)
    settle()
    node = Node.objects.filter(chip__slug="mlu370-x8").first()
    services.set_drained(Actor(ops_user), zone_slug=node.zone.slug, name=node.name, drained=True)
    rows = {(r.zone.slug, r.chip.slug): r for r in reports.capacity()}

    ascend = rows[("cn-east-xc", "ascend-910b")]
    assert ascend.cards_used == 2 and ascend.running_instances == 1
    assert ascend.cards_free == ascend.cards_total - 2
    mlu = rows[(node.zone.slug, "mlu370-x8")]
    assert mlu.cards_drained == node.cards and mlu.cards_free == mlu.cards_total - node.cards


def test_a_capacity_snapshot_is_written_once_per_slot_and_charted(client, ops_user, catalog):
    at = timezone.now()
    first = reports.record_capacity_snapshot(at)
    assert first > 0 and reports.record_capacity_snapshot(at) == 0  # an overlapping beat writes nothing
    reports.record_capacity_snapshot(at + timedelta(minutes=5))
    assert CapacitySnapshot.objects.values("at").distinct().count() == 2

    client.force_login(ops_user)
    page = client.get(reverse("ops:capacity")).content.decode()
    assert 'id="capacity-data"' in page and "ops/capacity-chart.js" in page


def test_the_capacity_task_records_a_snapshot(catalog):

    assert record_capacity_snapshot.apply().get() > 0


def _many(n, finance_user, ops_user):
    for i in range(n):
        user = UserFactory(email=f"bulk{uuid.uuid4().hex[:8]}@example.com")
        verification.apply(
            user,
            company_name=f"Co {i}",
            licence_number="91350100M000100Y43",
            contact_name="Wang",
            contact_phone="010-12345678",
        )
        services.adjust_balance(
            Actor(finance_user), user_id=user.public_id, amount="1", reason="bulk", idempotency_key=str(uuid.uuid4())
        )
        reports.record_capacity_snapshot(timezone.now() - timedelta(minutes=5 * i))


@pytest.mark.parametrize(
    ("url_name", "persona"),
    [
        ("ops:users", "finance"),
        ("ops:audit", "finance"),
        ("ops:reviews", "ops"),
        ("ops:capacity", "ops"),
        ("ops:revenue", "finance"),
        ("ops:subsidies", "finance"),
        ("ops:prices", "finance"),
        ("ops:index", "ops"),
    ],
)
def test_ops_list_pages_use_a_constant_number_of_queries(
    client, catalog, finance_user, ops_user, url_name, persona, django_assert_max_num_queries
):
    user = {"finance": finance_user, "ops": ops_user}[persona]
    client.force_login(user)
    _many(2, finance_user, ops_user)

    with CaptureQueriesContext(connection) as few:
        assert client.get(reverse(url_name)).status_code == 200
    _many(12, finance_user, ops_user)
    with django_assert_max_num_queries(len(few.captured_queries)):
        assert client.get(reverse(url_name)).status_code == 200


def test_the_user_page_uses_a_constant_number_of_queries(
    client, finance_user, ops_user, owner, launch, lifecycle, django_assert_max_num_queries
):

    client.force_login(finance_user)
    url = reverse("ops:user", args=[owner.public_id])
    launch(name="a")
    services.adjust_balance(
        Actor(finance_user), user_id=owner.public_id, amount="1", reason="x", idempotency_key=str(uuid.uuid4())
    )
    with CaptureQueriesContext(connection) as few:
        client.get(url)
    for i in range(8):
        launch(name=f"more-{i}", chip="a800-80g", image="pytorch-2.2-cuda12")
        services.adjust_balance(
            Actor(finance_user), user_id=owner.public_id, amount="1", reason="x", idempotency_key=str(uuid.uuid4())
        )
    with django_assert_max_num_queries(len(few.captured_queries)):
        assert client.get(url).status_code == 200
    assert AuditEntry.objects.count() == 9
