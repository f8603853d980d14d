"""Authors of community images earn a share of what OTHER users spend running them: credited through the ledger
by metering, exactly once per charge, balanced, without drift, and shown on the author's earnings page."""

from datetime import timedelta
from decimal import Decimal

import pytest
from django.conf import settings
from django.utils import timezone

from billing import ledger, metering, wallet
from billing.choices import AccountKind, TransactionKind
from billing.models import Account, LedgerTransaction
from billing.money import to_cents
from billing.quote import quote
from catalog.models import Chip

pytestmark = pytest.mark.django_db


@pytest.fixture
def listed(owner, community_image):
    return community_image(base="mindspore-2.3", name="Tuned MindSpore")


def _metered(launch, user, variant_slug, started_at):
    """An instance of ``variant_slug`` run by ``user`` and metered for real from ``started_at``."""
    instance = launch(user=user, chip="ascend-910b", image=variant_slug, name=f"run-{user.pk}")
    q = quote(chip=Chip.objects.get(slug="ascend-910b"), cards=1)
    metering.open_usage(user=user, kind="instance", resource_id=instance.public_id, quote=q, started_at=started_at)
    return instance


def _fund(user, amount="100"):
    wallet.adjust_balance(user=user, amount=Decimal(amount), reason="test", staff=None, idempotency_key=f"f{user.pk}")


def _cash(user) -> Decimal:
    return Account.objects.get(user=user, kind=AccountKind.USER_CASH).balance


def test_the_author_earns_the_share_of_each_charge_exactly_once(owner, stranger, launch, listed, settings):
    settings.METERING_POSTING_MINUTES = 1  # a charge every minute: ninety-one one-minute shares, none drifting
    _fund(stranger)
    t0 = timezone.now() - timedelta(hours=2)
    _metered(launch, stranger, f"{listed.slug}-npu", t0)
    # one tick per minute for 90 minutes, each run twice (an overlapping beat, a retried task)
    for minute in range(1, 91):
        metering.meter(now=t0 + timedelta(minutes=minute, seconds=1))
        metering.meter(now=t0 + timedelta(minutes=minute, seconds=1))
    charges = LedgerTransaction.objects.filter(kind=TransactionKind.USAGE, user=stranger)
    payouts = LedgerTransaction.objects.filter(kind=TransactionKind.AUTHOR_PAYOUT, user=owner)
    spent = -sum(t.user_amount for t in charges)
    earned = sum(t.user_amount for t in payouts)
    assert spent == to_cents(Decimal("1.71") * 91 / 60)  # 91 started minutes at the subsidised ¥1.71/h
    assert earned == to_cents(spent * Decimal("0.03")) > 0  # no drift from a hundred one-fen charges
    charge_keys = {t.idempotency_key for t in charges}
    assert all(p.idempotency_key.removeprefix("author-share:") in charge_keys for p in payouts)
    assert len({p.idempotency_key for p in payouts}) == payouts.count()
    assert _cash(owner) == earned and all(p.resource_id == listed.public_id for p in payouts)
    assert ledger.check() == []  # balanced, caches equal sums


def test_the_share_is_configurable(owner, stranger, launch, listed, settings):
    settings.IMAGE_AUTHOR_SHARE = "0.10"
    _fund(stranger)
    t0 = timezone.now() - timedelta(hours=2)
    _metered(launch, stranger, f"{listed.slug}-npu", t0)
    metering.meter(now=t0 + timedelta(minutes=60))
    assert _cash(owner) == Decimal("0.17")  # 10% of ¥1.71
    assert ledger.check() == []


def test_no_share_for_the_authors_own_use_or_official_images(owner, stranger, launch, listed):
    _fund(owner)
    _fund(stranger)
    t0 = timezone.now() - timedelta(hours=2)
    _metered(launch, owner, f"{listed.slug}-npu", t0)
    _metered(launch, stranger, "mindspore-2.3-cann8", t0)
    metering.meter(now=t0 + timedelta(minutes=60))
    assert LedgerTransaction.objects.filter(kind=TransactionKind.USAGE).count() == 2
    assert not LedgerTransaction.objects.filter(kind=TransactionKind.AUTHOR_PAYOUT).exists()
    assert ledger.check() == []


def test_closing_a_session_pays_the_share_of_its_last_charge(owner, stranger, launch, listed):
    _fund(stranger)
    t0 = timezone.now() - timedelta(hours=3)
    instance = _metered(launch, stranger, f"{listed.slug}-npu", t0)
    metering.close_usage(resource_id=instance.public_id, ended_at=t0 + timedelta(hours=2))
    metering.close_usage(resource_id=instance.public_id, ended_at=t0 + timedelta(hours=2))
    assert _cash(owner) == to_cents(Decimal("3.42") * Decimal("0.03"))
    assert ledger.check() == []


def test_the_earnings_page_shows_what_the_author_earned(client, owner, stranger, launch, listed):
    _fund(stranger)
    t0 = timezone.now() - timedelta(hours=2)
    _metered(launch, stranger, f"{listed.slug}-npu", t0)
    metering.meter(now=t0 + timedelta(minutes=100))
    client.force_login(owner)
    client.cookies[settings.LANGUAGE_COOKIE_NAME] = "en"
    html = client.get("/marketplace/earnings/").content.decode()
    assert f"¥{_cash(owner)}" in html and "Tuned MindSpore" in html
    client.force_login(stranger)
    assert "Tuned MindSpore" not in client.get("/marketplace/earnings/").content.decode()


def test_a_prepaid_plan_pays_the_author_the_share_of_its_upfront_charge_once(owner, stranger, launch, listed):
    _fund(stranger, "1000")
    instance = launch(user=stranger, chip="ascend-910b", image=f"{listed.slug}-npu", name="daily-run")
    daily = quote(chip=Chip.objects.get(slug="ascend-910b"), cards=1, plan="daily", minutes=1440)
    for _attempt in range(2):  # a retried task charges the same term once
        wallet.charge_upfront(user=stranger, quote=daily, resource_id=instance.public_id, idempotency_key="term-1")

    charge = LedgerTransaction.objects.get(kind=TransactionKind.UPFRONT, user=stranger)
    payout = LedgerTransaction.objects.get(kind=TransactionKind.AUTHOR_PAYOUT, user=owner)
    assert -charge.user_amount == daily.payable_total
    assert payout.user_amount == to_cents(daily.payable_total * Decimal("0.03")) > 0
    assert payout.idempotency_key == "author-share:term-1" and payout.resource_id == listed.public_id
    assert _cash(owner) == payout.user_amount and ledger.check() == []


def test_a_prepaid_plan_on_ones_own_image_pays_no_share(owner, launch, listed):
    _fund(owner, "1000")
    instance = launch(user=owner, chip="ascend-910b", image=f"{listed.slug}-npu", name="mine")
    daily = quote(chip=Chip.objects.get(slug="ascend-910b"), cards=1, plan="daily", minutes=1440)
    wallet.charge_upfront(user=owner, quote=daily, resource_id=instance.public_id, idempotency_key="term-own")
    assert not LedgerTransaction.objects.filter(kind=TransactionKind.AUTHOR_PAYOUT).exists()
