"""Cloud storage beyond the free 50 GB, charged once a day per GB-day from cash, exactly once per user per day."""

from datetime import UTC, date, datetime
from decimal import Decimal

import pytest

from billing.models import LedgerTransaction, StoragePrice
from billing.wallet import compute_balance
from storage import charges as storage_charges
from storage import quota, tasks
from storage.models import Entry

GB = quota.GB
NOW = datetime(2026, 3, 2, 1, 0, tzinfo=UTC)


def _store(user, gigabytes, name="weights.bin"):
    return Entry.objects.create(owner=user, kind="file", name=name, path=f"/{name}", size=int(gigabytes * GB))


@pytest.fixture
def prices(catalog):
    return StoragePrice.objects.get(resource="storage")


def test_storage_beyond_the_free_tier_is_charged_per_gb_day_from_cash(owner, stranger, prices):
    _store(owner, 80)  # 30 GB billable
    _store(stranger, 40)  # within the free tier
    assert storage_charges.charge_day(date(2026, 3, 1), now=NOW) == 1
    charge = LedgerTransaction.objects.get(user=owner, kind="storage")
    assert charge.user_amount == Decimal("-0.30")  # 30 GB × ¥0.01
    assert "2026-03-01" in charge.reference
    assert compute_balance(owner) == Decimal("-0.30")
    assert not LedgerTransaction.objects.filter(user=stranger).exists()


def test_the_daily_charge_is_booked_once_per_user_per_day_however_often_it_runs(owner, prices):
    _store(owner, 150)
    for _run in range(3):
        storage_charges.charge_day(date(2026, 3, 1), now=NOW)
    storage_charges.charge_day(date(2026, 3, 2), now=NOW)
    amounts = list(LedgerTransaction.objects.filter(user=owner, kind="storage").values_list("user_amount", flat=True))
    assert amounts == [Decimal("-1.00"), Decimal("-1.00")]


def test_a_few_megabytes_past_the_free_tier_are_billed_not_rounded_away(owner, prices):
    Entry.objects.create(owner=owner, kind="file", name="a", path="/a", size=50 * GB + 10 * 1024 * 1024)
    assert storage_charges.billable_gb(10 * 1024 * 1024) == Decimal("0.01")
    prices.per_gb_day = Decimal("1.00")
    prices.save()
    storage_charges.charge_day(date(2026, 3, 1), now=NOW)
    assert LedgerTransaction.objects.get(user=owner).user_amount == Decimal("-0.01")


def test_the_beat_task_charges_yesterday(owner, prices, settings):
    import time_machine

    _store(owner, 60)
    with time_machine.travel(NOW, tick=False):
        result = tasks.charge_storage_daily()
        tasks.charge_storage_daily()
    assert result["charged"] == 1
    assert LedgerTransaction.objects.get(user=owner, kind="storage").idempotency_key.endswith(":2026-03-01")


def test_later_runs_on_a_booked_day_stop_at_one_query_without_reading_usage_or_locking(
    owner, stranger, prices, django_assert_num_queries
):
    _store(owner, 80)
    _store(stranger, 90)
    assert storage_charges.charge_day(date(2026, 3, 1), now=NOW) == 2
    _store(stranger, 10, name="more.bin")  # usage changed meanwhile: the day stays as booked
    with django_assert_num_queries(1):
        assert storage_charges.charge_day(date(2026, 3, 1), now=NOW) == 0
    assert LedgerTransaction.objects.filter(kind="storage").count() == 2
    assert storage_charges.charge_day(date(2026, 3, 2), now=NOW) == 2  # the next day is not booked yet
