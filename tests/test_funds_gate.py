"""The one funds and arrears gate: every resource that bills — instances, endpoints, cloud disks, storage past the
free tier — is refused when the balance cannot carry its first hour on top of one hour of what already runs,
when the owner is in arrears, or (disks) past the operator's per-user limits; nothing is written when refused.
Concurrent launches of one user are checked one after another, so they cannot each spend the whole balance."""

from decimal import Decimal

import pytest
from django.db import connection

from billing import wallet
from billing.models import UsageSession
from catalog.models import Zone
from core.errors import PaymentRequired, ServiceError
from instances import launching
from instances.models import Instance
from instances.tests.fixtures import settle
from storage import disks
from storage.models import CloudDisk, Upload
from storage.tests.fixtures import MB, tus_create
from tests.fixtures.concurrency import race
from tests.fixtures.factories import top_up

pytestmark = pytest.mark.django_db

CHIP, IMAGE = "mlu370-x8", "pytorch-2.2-neuware"


@pytest.fixture
def zone(catalog):
    return Zone.objects.get(slug="cn-east-xc")


def _launch(user, cards=2, name="gate"):
    return launching.launch(user, launching.LaunchRequest(name=name, chip=CHIP, image=IMAGE, cards=cards))


def _rate(user, cards=2) -> Decimal:
    return launching.preview(
        user, launching.LaunchRequest(name="x", chip=CHIP, image=IMAGE, cards=cards)
    ).payable_per_hour


def _in_arrears(user):
    """Cash below zero, as metering leaves it when usage outruns the balance."""
    top_up(user, "1")
    wallet.adjust_balance(user=user, amount=Decimal("-3"), reason="usage owed", staff=None, idempotency_key="owed")
    assert wallet.summary(user).cash == Decimal("-2.00")


# Instances ------------------------------------------------------------------------------------------------------


def test_launches_that_the_balance_cannot_carry_together_are_refused_once_it_is_committed(owner, catalog, instant):
    top_up(owner, "10")
    rate = _rate(owner)
    fits = int(Decimal("10") // rate)
    assert fits >= 2

    started = [_launch(owner, name=f"gate-{i}") for i in range(fits)]
    with pytest.raises(PaymentRequired) as refused:
        _launch(owner, name="one-too-many")

    assert len(started) == fits
    assert "kept for one hour of what you already run" in refused.value.message
    assert Instance.objects.filter(owner=owner).count() == fits


def _concurrent_launches(owner):
    top_up(owner, "10")
    rate = _rate(owner)
    results = race([lambda i=i: _launch(owner, name=f"race-{i}") for i in range(8)])
    won = [r for r in results if isinstance(r, Instance)]
    refused = [r for r in results if isinstance(r, PaymentRequired)]
    assert len(won) + len(refused) == 8, results
    # Exactly as many as one hour of the balance pays for: together they never outrun it.
    assert len(won) * rate <= Decimal("10") < (len(won) + 1) * rate + Decimal("0.01")
    assert Instance.objects.filter(owner=owner).count() == len(won)


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_concurrent_launches_cannot_each_spend_the_whole_balance_on_postgresql(owner, catalog, instant):
    assert connection.vendor == "postgresql"
    _concurrent_launches(owner)


@pytest.mark.django_db(transaction=True)
def test_concurrent_launches_cannot_each_spend_the_whole_balance_on_sqlite(owner, catalog, instant):
    if connection.vendor != "sqlite":
        pytest.skip("the PostgreSQL twin of this test runs there")
    _concurrent_launches(owner)


def test_a_user_in_arrears_launches_nothing_even_with_trial_credit(owner, catalog, instant):
    wallet.grant_trial_credit(owner, owner.email)
    _in_arrears(owner)

    with pytest.raises(PaymentRequired) as refused:
        _launch(owner)

    assert refused.value.code == "in_arrears"
    assert "(\u2212¥2.00)" in refused.value.message
    assert not Instance.objects.exists()


def test_the_api_answers_a_refused_launch_with_402_and_the_reason(owner_api, owner, catalog, instant):
    body = {"name": "gate", "chip": CHIP, "image": IMAGE, "cards": 2}
    response = owner_api.post("/api/v1/instances", body, format="json", HTTP_ACCEPT_LANGUAGE="en")
    assert response.status_code == 402
    assert response.json()["code"] == "insufficient_balance"
    assert not Instance.objects.exists()


# Cloud disks ----------------------------------------------------------------------------------------------------


def test_a_disk_on_an_empty_wallet_is_refused_and_nothing_is_written(owner, zone):
    with pytest.raises(PaymentRequired):
        disks.create(owner, name="data", size_gb=100, zone=zone)
    assert not CloudDisk.objects.exists() and not UsageSession.objects.exists()


def test_disks_are_paid_from_cash_so_trial_credit_alone_does_not_buy_one(owner, zone):
    wallet.grant_trial_credit(owner, owner.email)
    with pytest.raises(PaymentRequired) as refused:
        disks.create(owner, name="data", size_gb=100, zone=zone)
    assert "trial credit pays for compute only" in refused.value.message


def test_a_disk_in_arrears_is_refused(owner, zone):
    _in_arrears(owner)
    with pytest.raises(PaymentRequired) as refused:
        disks.create(owner, name="data", size_gb=1, zone=zone)
    assert refused.value.code == "in_arrears"


def test_growing_a_disk_past_what_the_balance_carries_is_refused_and_the_size_kept(owner, zone):
    top_up(owner, "1")
    disk = disks.create(owner, name="data", size_gb=100, zone=zone)

    with pytest.raises(PaymentRequired):
        disks.grow(owner, disk.public_id, 32 * 1024)  # ¥13.65 an hour

    disk.refresh_from_db()
    assert disk.size_gb == 100
    assert UsageSession.objects.open().get(resource_id=disk.public_id).payable_per_hour == Decimal("0.041667")


def test_the_operator_limits_how_many_disks_and_how_many_gb_a_user_has(owner, zone, settings):
    top_up(owner, "1000")
    settings.DISK_MAX_PER_USER, settings.DISK_MAX_TOTAL_GB = 2, 150
    first = disks.create(owner, name="a", size_gb=100, zone=zone)

    with pytest.raises(ServiceError) as too_big:
        disks.create(owner, name="b", size_gb=60, zone=zone)
    assert too_big.value.code == "disk_limit" and "at most 50 GB more" in too_big.value.message
    with pytest.raises(ServiceError):
        disks.grow(owner, first.public_id, 151)
    disks.create(owner, name="b", size_gb=50, zone=zone)
    with pytest.raises(ServiceError) as too_many:
        disks.create(owner, name="c", size_gb=1, zone=zone)
    assert too_many.value.code == "disk_limit"
    assert CloudDisk.objects.count() == 2


def test_the_disk_api_answers_402_on_an_empty_wallet(owner_api, zone):
    response = owner_api.post(
        "/api/v1/disks", {"name": "data", "size_gb": 100, "zone": zone.slug}, format="json", HTTP_ACCEPT_LANGUAGE="en"
    )
    assert response.status_code == 402
    assert response.json()["code"] == "insufficient_balance"
    assert not CloudDisk.objects.exists()


# Cloud storage past the free tier -------------------------------------------------------------------------------


def test_an_upload_past_the_free_tier_needs_cash_one_within_it_does_not(owner_api, owner, catalog, settings):
    settings.STORAGE_FREE_GB = 1 / 1024  # 1 MB free

    assert tus_create(owner_api, MB // 2, "small.bin").status_code == 201
    refused = tus_create(owner_api, MB, "big.bin")
    assert refused.status_code == 402
    assert Upload.objects.filter(owner=owner).count() == 1

    top_up(owner, "10")
    assert tus_create(owner_api, MB, "big.bin").status_code == 201


# Prepaid terms ---------------------------------------------------------------------------------------------------


def _daily_total(user) -> Decimal:
    request = launching.LaunchRequest(name="x", chip=CHIP, image=IMAGE, cards=1, plan="daily")
    return launching.preview(user, request).payable_total


def _launch_daily(user, name):
    return launching.launch(user, launching.LaunchRequest(name=name, chip=CHIP, image=IMAGE, cards=1, plan="daily"))


def test_a_prepaid_launch_on_its_way_up_holds_its_whole_term(owner, catalog, instant):
    # Its term is charged when it runs, so a second launch cannot count on the same money meanwhile.
    term = _daily_total(owner)
    top_up(owner, str(term + 5))

    _launch_daily(owner, "first")
    with pytest.raises(PaymentRequired):
        _launch_daily(owner, "second")

    assert Instance.objects.filter(owner=owner).count() == 1


def test_a_term_that_cannot_be_paid_when_the_machine_is_up_fails_it_and_reconcile_goes_on(
    owner, stranger, catalog, instant
):

    term = _daily_total(owner)
    top_up(owner, str(term))
    prepaid = _launch_daily(owner, "prepaid")
    cash = wallet.summary(owner).cash
    wallet.withdraw_cash(user=owner, amount=cash - 1, idempotency_key="spent-elsewhere")
    top_up(stranger, "10")
    other = _launch(stranger, cards=1, name="other")

    settle()

    prepaid.refresh_from_db(), other.refresh_from_db()
    assert prepaid.status == "failed" and prepaid.status_reason == "arrears" and prepaid.reserved_cards == 0
    assert prepaid.term_ends_at is None
    assert other.status == "running"


def test_a_launch_with_a_new_data_disk_must_carry_both_first_hours(owner, catalog, instant):
    rate = _rate(owner)
    top_up(owner, str(rate + Decimal("0.03")))  # the instance's hour, and less than the 100 GB disk's (¥0.04)
    request = launching.LaunchRequest(name="with-disk", chip=CHIP, image=IMAGE, cards=2, data_disk_gb=100)

    with pytest.raises(PaymentRequired):
        launching.launch(owner, request)

    assert not Instance.objects.exists() and not CloudDisk.objects.exists()
    assert _launch(owner, name="without-disk").status == "creating"
