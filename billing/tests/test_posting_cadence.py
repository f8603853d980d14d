"""Posting every few minutes (``METERING_POSTING_MINUTES``): the same money in fewer postings, staggered over the
ticks, and every minute for whoever could run past zero, a cap or a budget."""

import uuid
from datetime import datetime, timedelta
from decimal import Decimal
from zoneinfo import ZoneInfo

import pytest

from billing import ledger, wallet
from billing.choices import TransactionKind
from billing.metering import close_usage, meter, open_usage
from billing.models import LedgerTransaction, UsageSession
from billing.quote import quote

pytestmark = pytest.mark.django_db

START = datetime(2026, 3, 2, 9, 0, 0, tzinfo=ZoneInfo("Asia/Shanghai"))


@pytest.fixture
def every_five(settings):
    settings.METERING_POSTING_MINUTES = 5


def _tick(minute, seconds=7):
    return meter(START + timedelta(minutes=minute, seconds=seconds))


def _open(user, q, started_at=START):
    resource = uuid.uuid4()
    open_usage(user=user, kind="instance", resource_id=resource, quote=q, started_at=started_at)
    return resource


def _usage_postings(user):
    return LedgerTransaction.objects.filter(user=user, kind=TransactionKind.USAGE)


@pytest.mark.parametrize("every", [1, 5])
def test_a_run_costs_the_same_exact_amount_whatever_the_cadence_in_a_fifth_of_the_postings(
    catalog, xinchuang_subsidy, owner, fund, settings, every
):
    settings.METERING_POSTING_MINUTES = every
    fund(owner, "100")
    q = quote(chip=catalog["mlu370-x8"], cards=3, at=START)
    resource = _open(owner, q)
    for minute in range(187):
        _tick(minute)
    close_usage(resource_id=resource, ended_at=START + timedelta(minutes=187))

    session = UsageSession.objects.get(resource_id=resource)
    assert (session.charged_minutes, session.charged, session.subsidy_booked) == (
        187,
        Decimal("14.31"),
        Decimal("1.59"),
    )
    assert wallet.compute_balance(owner) == Decimal("85.69")
    postings = _usage_postings(owner).count()
    assert postings == 187 if every == 1 else 37 <= postings <= 39
    assert sum(_usage_postings(owner).values_list("minutes", flat=True)) == 187
    assert ledger.check() == []


def test_sessions_started_together_are_posted_on_different_ticks(catalog, owner, fund, every_five):
    fund(owner, "1000")
    q = quote(chip=catalog["a100-80g"], cards=1, at=START)
    for _ in range(10):
        _open(owner, q)

    assert _tick(0).charged == 10  # the first minute of each, as it starts
    # Then two of the ten on each of the next five ticks, and a tick between minutes reads none of them.
    assert [_tick(minute).charged for minute in range(1, 6)] == [2, 2, 2, 2, 2]
    assert _tick(5, seconds=40).sessions == 0
    assert [_tick(minute).charged for minute in range(6, 11)] == [2, 2, 2, 2, 2]
    # Each is billed up to a minute of its own phase: never more than five minutes behind the eleven started.
    assert sorted(UsageSession.objects.values_list("charged_minutes", flat=True)) == [7, 7, 8, 8, 9, 9, 10, 10, 11, 11]
    assert ledger.check() == []


def test_a_payer_within_an_hour_of_spend_of_zero_is_posted_every_minute_and_stopped_at_zero(
    catalog, owner, fund, every_five, arrears_calls, django_capture_on_commit_callbacks
):
    fund(owner, "1.00")
    q = quote(chip=catalog["a100-80g"], cards=1, at=START)  # 8 fen a minute, ¥4.80 an hour: ¥1 is low
    _open(owner, q)

    charged = []
    for minute in range(13):
        with django_capture_on_commit_callbacks(execute=True):
            charged.append(_tick(minute).charged)
    assert charged == [1] * 13  # every minute, as with a one-minute cadence
    # The stop is asked on the tick the balance reaches zero: 13 minutes, ¥1.04, as with a one-minute cadence.
    assert wallet.compute_balance(owner) == Decimal("-0.04")
    assert arrears_calls == [(owner.pk, "arrears")]


def test_a_payer_with_a_spending_cap_is_posted_every_minute(catalog, owner, fund, every_five):
    fund(owner, "100")
    wallet.set_spending_cap(owner, "50")
    q = quote(chip=catalog["a100-80g"], cards=1, at=START)
    _open(owner, q)

    assert [_tick(minute).charged for minute in range(6)] == [1] * 6


def test_a_well_funded_payer_is_posted_every_five_minutes(catalog, owner, fund, every_five):
    fund(owner, "100")
    q = quote(chip=catalog["a100-80g"], cards=1, at=START)
    _open(owner, q)

    charged = [_tick(minute).charged for minute in range(11)]
    assert charged[0] == 1 and sum(charged) == 3
    assert _usage_postings(owner).count() == 3


def test_when_a_payer_turns_low_their_sessions_on_the_longer_cadence_come_to_the_next_tick(
    catalog, owner, fund, every_five
):
    fund(owner, "10.50")  # two cards at ¥4.80 an hour each: more than an hour's spend, until a few minutes in
    q = quote(chip=catalog["a100-80g"], cards=1, at=START)
    first, second = _open(owner, q), _open(owner, q)
    for minute in range(5):
        _tick(minute)
    assert _usage_postings(owner).count() < 2 * 5  # well funded: the longer cadence

    # The balance falls under an hour of spend (¥9.60) within ten minutes. The tick that sees it charges one of the
    # sessions; the next tick charges both, the other one no longer waiting for its turn on the longer cadence.
    minute = 5
    while wallet.compute_balance(owner) >= Decimal("9.60"):
        _tick(minute)
        minute += 1
    assert minute <= 11
    assert _tick(minute).charged == 2
    assert _tick(minute + 1).charged == 2
    assert {UsageSession.objects.get(resource_id=r).charged_minutes for r in (first, second)} == {minute + 2}
    assert ledger.check() == []


def test_closing_charges_every_minute_not_yet_posted(catalog, owner, fund, every_five):
    fund(owner, "100")
    q = quote(chip=catalog["a100-80g"], cards=1, at=START)  # 8 fen a minute
    resource = _open(owner, q)
    minute = 0
    while True:  # up to the first tick that leaves a started minute unposted (which one depends on the phase)
        _tick(minute)
        if UsageSession.objects.get(resource_id=resource).charged_minutes < minute + 1:
            break
        minute += 1
    assert minute < 6

    close_usage(resource_id=resource, ended_at=START + timedelta(minutes=minute, seconds=30))

    session = UsageSession.objects.get(resource_id=resource)
    billed = minute + 1
    assert (session.charged_minutes, session.charged) == (billed, Decimal("0.08") * billed)
    assert wallet.compute_balance(owner) == Decimal("100") - Decimal("0.08") * billed
    assert ledger.check() == []


def test_a_session_without_a_schedule_is_charged_by_the_next_tick(catalog, owner, fund, every_five):
    fund(owner, "100")
    q = quote(chip=catalog["a100-80g"], cards=1, at=START)
    resource = _open(owner, q)
    UsageSession.objects.filter(resource_id=resource).update(charge_due_at=None)

    assert _tick(3).charged == 1
    assert UsageSession.objects.get(resource_id=resource).charged_minutes == 4
