"""Posting every few minutes (``METERING_POSTING_MINUTES``): the same money in fewer postings, staggered over the
ticks, and every minute for whoever could run past zero, a cap or a budget."""

import uuid
from datetime import datetime, timedelta
from decimal import Decimal
from zoneinfo import ZoneInfo

import pytest

from billing import ledger, wallet
from billing.choices import AccountKind, TransactionKind
from billing.metering import close_usage, meter, open_usage
from billing.models import Account, LedgerTransaction, UsageSession
from billing.quote import quote
from teams import services as teams
from teams.models import Membership
from teams.roles import Role
from tests.fixtures.factories import UserFactory

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


@pytest.fixture
def hourly(settings):
    settings.METERING_POSTING_MINUTES = 60


def test_a_spending_cap_set_between_postings_stops_the_run_within_a_minute(
    catalog, owner, fund, hourly, arrears_calls, django_capture_on_commit_callbacks
):
    fund(owner, "1000")
    q = quote(chip=catalog["a100-80g"], cards=1, at=START)  # 8 fen a minute
    _open(owner, q)
    _tick(0)
    with django_capture_on_commit_callbacks(execute=True):
        wallet.set_spending_cap(owner, "0.50")  # reached in the seventh minute

    minute = 0
    while not arrears_calls and minute < 70:
        minute += 1
        with django_capture_on_commit_callbacks(execute=True):
            _tick(minute)
    # Asked on the tick that bills the seventh minute (¥0.56), as with a posting a minute; not an hour later.
    assert (minute, arrears_calls) == (6, [(owner.pk, "spending_cap")])


def test_a_members_budget_set_between_postings_is_watched_from_the_next_tick(
    catalog, owner, fund, hourly, django_capture_on_commit_callbacks
):

    team = teams.create_team(owner, name="Vision", slug="vision")
    fund(team.account, "1000")
    member = UserFactory(email="member@example.com")
    Membership.objects.create(team=team, user=member, role=Role.DEVELOPER)
    q = quote(chip=catalog["a100-80g"], cards=1, at=START)
    resource = uuid.uuid4()
    open_usage(user=team.account, kind="instance", resource_id=resource, quote=q, started_at=START, member_id=member.pk)
    _tick(0)

    with django_capture_on_commit_callbacks(execute=True):
        teams.set_budget(teams.membership(owner, "vision"), member.public_id, "0.50")

    assert _tick(1).charged == 1
    assert [_tick(minute).charged for minute in range(2, 5)] == [1, 1, 1]  # every minute under a budget


def test_trial_credit_expiring_before_the_next_posting_pays_only_for_the_minutes_it_was_usable(
    catalog, owner, fund, hourly
):
    fund(owner, "100")
    wallet.grant_trial_credit(owner, owner.email)
    trial = ledger.user_accounts([owner.pk])[owner.pk][AccountKind.USER_TRIAL]
    Account.objects.filter(pk=trial.pk).update(expires_at=START + timedelta(minutes=30, seconds=30))
    q = quote(chip=catalog["a100-80g"], cards=1, at=START)  # 8 fen a minute
    resource = _open(owner, q)
    for minute in range(90):
        _tick(minute)
    close_usage(resource_id=resource, ended_at=START + timedelta(minutes=90))

    # As with a posting a minute: the trial pays for the 31 minutes billed while it was usable, cash for the rest.
    accounts = ledger.user_accounts([owner.pk])[owner.pk]
    assert accounts[AccountKind.USER_TRIAL].balance == Decimal("10") - Decimal("0.08") * 31
    assert accounts[AccountKind.USER_CASH].balance == Decimal("100") - Decimal("0.08") * (90 - 31)
    assert ledger.check() == []


def test_no_posting_carries_minutes_of_one_month_into_the_next(catalog, owner, fund, hourly):
    fund(owner, "100")
    late = datetime(2026, 3, 31, 23, 50, 0, tzinfo=ZoneInfo("Asia/Shanghai"))
    q = quote(chip=catalog["a100-80g"], cards=1, at=late)
    _open(owner, q, started_at=late)
    for minute in range(20):  # 23:50:07 … 00:09:07
        meter(late + timedelta(minutes=minute, seconds=7))

    march = _usage_postings(owner).filter(created_at__lt=datetime(2026, 4, 1, tzinfo=ZoneInfo("Asia/Shanghai")))
    # Everything started before midnight is posted before it (the 23:59 tick bills the minute started at 23:59).
    assert sum(march.values_list("minutes", flat=True)) == 10
    assert sum(_usage_postings(owner).values_list("minutes", flat=True)) <= 20


def test_a_cadence_shortened_since_brings_sessions_scheduled_further_off_to_the_next_tick(
    catalog, owner, fund, settings
):
    settings.METERING_POSTING_MINUTES = 60
    fund(owner, "100")
    q = quote(chip=catalog["a100-80g"], cards=1, at=START)
    resource = _open(owner, q)
    _tick(0)

    settings.METERING_POSTING_MINUTES = 1
    assert [_tick(minute).charged for minute in range(1, 4)] == [1, 1, 1]
    assert UsageSession.objects.get(resource_id=resource).charged_minutes == 4


@pytest.mark.parametrize("debit", ["staff", "storage"])
def test_a_wallet_lowered_between_postings_by_anything_but_metering_is_stopped_at_zero_within_a_minute(
    catalog, owner, fund, every_five, arrears_calls, django_capture_on_commit_callbacks, debit
):
    fund(owner, "100")
    q = quote(chip=catalog["a100-80g"], cards=1, at=START)  # 8 fen a minute: well funded, posted every five
    _open(owner, q)
    with django_capture_on_commit_callbacks(execute=True):
        _tick(0)
    # Something else takes all but 30 fen (under four minutes of spend) before the session's next posting is due.
    with django_capture_on_commit_callbacks(execute=True):
        if debit == "staff":
            wallet.adjust_balance(
                user=owner,
                amount=Decimal("0.30") - wallet.compute_balance(owner),
                reason="test",
                staff=None,
                idempotency_key="debit",
            )
        else:
            cash = ledger.user_accounts([owner.pk])[owner.pk][AccountKind.USER_CASH]
            revenue = ledger.system_account(AccountKind.REVENUE)
            amount = wallet.compute_balance(owner) - Decimal("0.30")
            ledger.post(
                ledger.Posting(
                    kind=TransactionKind.STORAGE,
                    idempotency_key="storage-day",
                    user_id=owner.pk,
                    entries=((cash.pk, -amount), (revenue.pk, amount)),
                )
            )
    minute = 0
    while not arrears_calls and minute < 10:
        minute += 1
        with django_capture_on_commit_callbacks(execute=True):
            _tick(minute)
    # Looked at by the very next tick and posted every minute from then on, as with a posting a minute: the stop is
    # asked on the tick that bills past zero (minute 4: 32 fen), not when the next five-minute posting came due.
    assert (minute, arrears_calls) == (4, [(owner.pk, "arrears")])
    assert wallet.compute_balance(owner) == Decimal("-0.02")
