"""Per-minute metering: exact rounded prices, frozen rates, trial before cash, overlapping and crashed ticks."""

import threading
import time
import uuid
from datetime import datetime, timedelta
from decimal import Decimal
from zoneinfo import ZoneInfo

import pytest
import time_machine
from django.db import connection, transaction

from billing import arrears, ledger, metering, wallet
from billing.metering import close_usage, meter, open_usage
from billing.models import LedgerTransaction, Notification, Price, SubsidyUsage, UsageSession
from billing.quote import quote
from core.errors import Conflict

pytestmark = pytest.mark.django_db

SHANGHAI = ZoneInfo("Asia/Shanghai")
START = datetime(2026, 3, 2, 9, 0, 0, tzinfo=SHANGHAI)


def _run(user, q, *, minutes, seconds=0, kind="instance", label="run"):
    """Open a session at START, tick every minute (a few seconds late, as beat does), close at the end."""
    resource = uuid.uuid4()
    open_usage(user=user, kind=kind, resource_id=resource, quote=q, started_at=START, label=label)
    end = START + timedelta(minutes=minutes, seconds=seconds)
    at = START + timedelta(seconds=7)
    while at < end:
        with time_machine.travel(at, tick=False):
            meter()
        at += timedelta(seconds=60)
    with time_machine.travel(end, tick=False):
        close_usage(resource_id=resource, ended_at=end)
    return UsageSession.objects.get(resource_id=resource)


def test_a_3h7m_run_of_three_mlu370_cards_at_1_7_is_charged_exactly_15_90(catalog, xinchuang_subsidy, owner, fund):
    xinchuang_subsidy.active = False
    xinchuang_subsidy.save()
    fund(owner, "100")
    q = quote(chip=catalog["mlu370-x8"], cards=3, at=START)
    assert q.payable_per_hour == Decimal("5.1")

    session = _run(owner, q, minutes=3 * 60 + 7)

    assert session.charged_minutes == 187
    assert session.charged == Decimal("15.90")
    assert wallet.compute_balance(owner) == Decimal("84.10")
    assert ledger.check() == []


def test_a_subsidised_run_splits_the_exact_price_between_the_user_and_the_programme(
    catalog, xinchuang_subsidy, owner, fund
):
    fund(owner, "100")
    q = quote(chip=catalog["mlu370-x8"], cards=3, at=START)

    session = _run(owner, q, minutes=187)

    # list 5.1/h: the user pays 4.59/h (14.31 for 187 min), the Xinchuang programme 0.51/h (1.59)
    assert (session.charged, session.subsidy_booked) == (Decimal("14.31"), Decimal("1.59"))
    xinchuang_subsidy.refresh_from_db()
    assert xinchuang_subsidy.spent == Decimal("1.59")
    assert SubsidyUsage.objects.get(user=owner).amount == Decimal("1.59")
    assert ledger.check() == []


def test_every_started_minute_is_billed_and_a_second_more_starts_another(catalog, owner, fund):
    fund(owner, "100")
    q = quote(chip=catalog["a100-80g"], cards=1, at=START)  # ¥4.80 an hour: 8 fen a minute

    session = _run(owner, q, minutes=10, seconds=1)

    assert session.charged_minutes == 11
    assert session.charged == Decimal("0.88")


def test_the_trial_credit_is_spent_before_cash(catalog, owner, fund):
    wallet.grant_trial_credit(owner, owner.email)
    fund(owner, "50")
    q = quote(chip=catalog["a100-80g"], cards=1, at=START)

    _run(owner, q, minutes=180)  # ¥14.40

    s = wallet.summary(owner)
    assert s.trial == Decimal("0") and s.cash == Decimal("45.60")
    assert ledger.check() == []


def test_disks_and_storage_are_paid_from_cash_never_from_the_trial_credit(catalog, owner, fund):
    wallet.grant_trial_credit(owner, owner.email)
    fund(owner, "5")
    q = quote(chip=catalog["a100-80g"], cards=1, at=START)

    _run(owner, q, minutes=60, kind="disk")

    s = wallet.summary(owner)
    assert s.trial == Decimal("10.00") and s.cash == Decimal("0.20")


def test_a_price_change_never_changes_the_rate_of_a_running_session(catalog, owner, fund):
    fund(owner, "100")
    q = quote(chip=catalog["a100-80g"], cards=1, at=START)
    Price.objects.create(chip=catalog["a100-80g"], per_hour=Decimal("9.6"), effective_from=START + timedelta(minutes=5))

    session = _run(owner, q, minutes=60)

    assert session.charged == Decimal("4.80")


def test_opening_the_same_session_twice_returns_it_and_a_second_open_session_is_refused(catalog, owner):
    q = quote(chip=catalog["a100-80g"], cards=1, at=START)
    resource = uuid.uuid4()
    first = open_usage(user=owner, kind="instance", resource_id=resource, quote=q, started_at=START)
    again = open_usage(user=owner, kind="instance", resource_id=resource, quote=q, started_at=START)
    assert first.pk == again.pk
    with pytest.raises(Conflict):
        open_usage(user=owner, kind="instance", resource_id=resource, quote=q, started_at=START + timedelta(hours=1))


def test_closing_charges_up_to_the_end_and_closing_again_changes_nothing(catalog, owner, fund):
    fund(owner, "100")
    q = quote(chip=catalog["a100-80g"], cards=1, at=START)
    resource = uuid.uuid4()
    open_usage(user=owner, kind="instance", resource_id=resource, quote=q, started_at=START)
    end = START + timedelta(minutes=30)
    with time_machine.travel(end + timedelta(minutes=5), tick=False):
        close_usage(resource_id=resource, ended_at=end)
        assert close_usage(resource_id=resource, ended_at=end) is None
        meter()
    assert UsageSession.objects.get(resource_id=resource).charged == Decimal("2.40")
    assert LedgerTransaction.objects.filter(usage_session__resource_id=resource).count() == 1


def test_a_prepaid_plan_is_metered_at_zero(catalog, owner, fund):
    fund(owner, "200")
    q = quote(chip=catalog["a100-80g"], cards=1, plan="daily", minutes=1440, at=START)

    session = _run(owner, q, minutes=60)

    assert session.prepaid and session.charged == 0


def test_a_tick_that_dies_midway_loses_only_its_chunk_and_the_next_tick_charges_each_minute_once(
    catalog, owner, fund, monkeypatch
):
    fund(owner, "100")
    q = quote(chip=catalog["a100-80g"], cards=1, at=START)
    resources = [uuid.uuid4() for _ in range(5)]
    for r in resources:
        open_usage(user=owner, kind="instance", resource_id=r, quote=q, started_at=START)
    real_post = ledger.post_batch
    calls = []

    def dying_post(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise SystemExit("worker killed")
        return real_post(*args, **kwargs)

    monkeypatch.setattr(metering, "post_batch", dying_post)
    with time_machine.travel(START + timedelta(minutes=10), tick=False):
        with pytest.raises(SystemExit):
            meter(chunk_size=2)
        monkeypatch.setattr(metering, "post_batch", real_post)
        meter(chunk_size=2)
        meter(chunk_size=2)

    assert [s.charged for s in UsageSession.objects.all()] == [Decimal("0.80")] * 5
    assert wallet.compute_balance(owner) == Decimal("96.00")
    assert ledger.check() == []


def test_the_subsidy_stops_at_the_programme_budget_but_the_users_rate_does_not_change(
    catalog, xinchuang_subsidy, owner, fund
):
    fund(owner, "100")
    q = quote(chip=catalog["mlu370-x8"], cards=3, at=START)
    # the budget runs out after the run started
    xinchuang_subsidy.budget = Decimal("0.50")
    xinchuang_subsidy.save()

    session = _run(owner, q, minutes=187)

    xinchuang_subsidy.refresh_from_db()
    assert xinchuang_subsidy.spent == Decimal("0.50")
    assert session.charged == Decimal("14.31")
    assert session.subsidy_booked + session.subsidy_unfunded == Decimal("1.59")
    assert ledger.check() == []


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_two_overlapping_ticks_charge_each_minute_once(catalog, owner, stranger, fund):

    fund(owner, "1000")
    fund(stranger, "1000")
    q = quote(chip=catalog["a100-80g"], cards=1, at=START)
    for i in range(40):
        user = owner if i % 2 else stranger
        open_usage(user=user, kind="instance", resource_id=uuid.uuid4(), quote=q, started_at=START)
    barrier = threading.Barrier(2)
    errors = []

    def tick():
        try:
            barrier.wait()
            meter(START + timedelta(minutes=30), chunk_size=7)
        except Exception as exc:  # surfaced below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=tick) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    assert errors == []
    assert {s.charged for s in UsageSession.objects.all()} == {Decimal("2.40")}
    assert LedgerTransaction.objects.filter(kind="usage").count() == 40
    assert wallet.compute_balance(owner) == wallet.compute_balance(stranger) == Decimal("952.00")
    assert ledger.check() == []


def test_at_zero_balance_the_arrears_handler_is_called_once_per_metering_period(
    catalog, owner, fund, arrears_calls, django_capture_on_commit_callbacks
):

    fund(owner, "1.00")
    q = quote(chip=catalog["a100-80g"], cards=1, at=START)  # 8 fen a minute: ¥1 lasts 12.5 minutes
    open_usage(user=owner, kind="instance", resource_id=uuid.uuid4(), quote=q, started_at=START)

    with django_capture_on_commit_callbacks(execute=True):
        meter(START + timedelta(minutes=5))
    assert arrears_calls == []
    assert Notification.objects.filter(user=owner, kind="low_balance").count() == 1
    with django_capture_on_commit_callbacks(execute=True):
        meter(START + timedelta(minutes=13))
    with django_capture_on_commit_callbacks(execute=True):
        meter(START + timedelta(minutes=13, seconds=20))  # the same metering period: not asked again
    assert arrears_calls == [(owner.pk, "arrears")]
    with django_capture_on_commit_callbacks(execute=True):
        meter(START + timedelta(minutes=14, seconds=10))  # still running a period later: asked again
    assert arrears_calls == [(owner.pk, "arrears")] * 2
    assert Notification.objects.filter(user=owner, kind="arrears").count() == 1
    assert Notification.objects.filter(user=owner, kind="low_balance").count() == 1


def test_reaching_the_monthly_spending_cap_acts_like_a_zero_balance(
    catalog, owner, fund, arrears_calls, django_capture_on_commit_callbacks
):
    fund(owner, "100")
    wallet.set_spending_cap(owner, "2")
    q = quote(chip=catalog["a100-80g"], cards=1, at=START)
    open_usage(user=owner, kind="instance", resource_id=uuid.uuid4(), quote=q, started_at=START)

    with time_machine.travel(START + timedelta(minutes=20), tick=False):
        with django_capture_on_commit_callbacks(execute=True):
            meter()
        assert wallet.summary(owner).month_spent == Decimal("1.60")
    assert arrears_calls == []
    with time_machine.travel(START + timedelta(minutes=26), tick=False):
        with django_capture_on_commit_callbacks(execute=True):
            meter()
    assert arrears_calls == [(owner.pk, "spending_cap")]


def test_a_broken_arrears_handler_never_breaks_metering(catalog, owner, monkeypatch):

    def broken(user_id, reason):
        raise RuntimeError("the handler is broken")

    monkeypatch.setattr(arrears, "_handler", broken)
    q = quote(chip=catalog["a100-80g"], cards=1, at=START)
    open_usage(user=owner, kind="instance", resource_id=uuid.uuid4(), quote=q, started_at=START)

    report = meter(START + timedelta(minutes=3))

    assert report.charged == 1
    assert wallet.compute_balance(owner) == Decimal("-0.24")


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_stop_while_a_tick_charges_the_session_waits_for_it_and_closes_the_session(catalog, owner, fund):

    fund(owner, "100")
    resource = uuid.uuid4()
    q = quote(chip=catalog["a100-80g"], cards=1, at=START)
    open_usage(user=owner, kind="instance", resource_id=resource, quote=q, started_at=START)
    held, done = threading.Event(), threading.Event()

    def tick_holding_the_session():
        try:
            with transaction.atomic():
                list(UsageSession.objects.select_for_update().filter(resource_id=resource))  # as meter() locks it
                held.set()
                time.sleep(0.5)
        finally:
            done.set()
            connection.close()

    thread = threading.Thread(target=tick_holding_the_session)
    thread.start()
    held.wait(10)
    closed = close_usage(resource_id=resource, ended_at=START + timedelta(minutes=10))
    thread.join()

    assert done.is_set() and closed is not None
    session = UsageSession.objects.get(resource_id=resource)
    assert session.ended_at == START + timedelta(minutes=10) and session.charged == Decimal("0.80")
    meter(START + timedelta(minutes=60))  # nothing more is billed for the stopped resource
    session.refresh_from_db()
    assert session.charged == Decimal("0.80")


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_stop_and_a_concurrent_charge_of_the_same_user_do_not_deadlock(catalog, owner, fund):

    fund(owner, "2.00")  # low: charging the stopped run raises a low-balance alert, which writes the wallet row
    q = quote(chip=catalog["a100-80g"], cards=1, at=START)  # 8 fen a minute
    stopped, other = uuid.uuid4(), uuid.uuid4()
    open_usage(user=owner, kind="instance", resource_id=stopped, quote=q, started_at=START)
    open_usage(user=owner, kind="disk", resource_id=other, quote=q, started_at=START)
    wallet_held = threading.Event()
    errors = []

    def charge_under_the_wallet_lock():  # as the funds gate does: the wallet row first, then a posting
        try:
            with transaction.atomic():
                wallet.lock_wallet(owner)
                wallet_held.set()
                time.sleep(0.5)  # the stop below starts meanwhile
                metering.charge_sessions(
                    list(UsageSession.objects.filter(resource_id=other)), START + timedelta(minutes=5)
                )
        except Exception as exc:  # surfaced below
            errors.append(exc)
        finally:
            connection.close()

    thread = threading.Thread(target=charge_under_the_wallet_lock)
    thread.start()
    wallet_held.wait(10)
    try:
        with transaction.atomic():  # a stop runs inside the lifecycle's own transaction
            close_usage(resource_id=stopped, ended_at=START + timedelta(minutes=10))
    except Exception as exc:
        errors.append(exc)
    thread.join()

    assert errors == []
    assert {s.resource_id: s.charged for s in UsageSession.objects.all()} == {
        stopped: Decimal("0.80"),
        other: Decimal("0.40"),
    }
    assert Notification.objects.filter(user=owner, kind="low_balance").count() == 1
    assert ledger.check() == []
