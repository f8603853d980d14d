"""Every started minute in the month, and at the price, in which it started — whatever second of the minute the
beat runs at and whatever the posting cadence; minutes after a late-noticed end are given back; the statement
counts every started minute, also those whose charge rounds to ¥0."""

import uuid
from datetime import date, datetime, timedelta
from decimal import Decimal
from zoneinfo import ZoneInfo

import pytest
import time_machine
from django.utils import translation

from billing import ledger, vouchers, wallet
from billing.metering import close_usage, meter, open_usage
from billing.models import Account, LedgerTransaction, Plan, Price, SubsidyUsage, UsageSession, Voucher
from billing.money import to_cents
from billing.quote import quote
from billing.statements import month_statement
from catalog.models import Chip

pytestmark = pytest.mark.django_db

SHANGHAI = ZoneInfo("Asia/Shanghai")  # TIME_ZONE: statements, spending and subsidy caps cut months here
MIDNIGHT = datetime(2026, 4, 1, 0, 0, 0, tzinfo=SHANGHAI)
MARCH, APRIL = date(2026, 3, 1), date(2026, 4, 1)
BEAT_PHASES = [0, 1, 29.5, 59.9]  # the second of each minute the metering beat runs at
START_OFFSETS = [0, 20.3, 45]  # the second of a minute the run started at


def _cost(per_hour, minutes) -> Decimal:
    return to_cents(Decimal(per_hour) * minutes / 60)


def _started_before(start, moment) -> int:
    """How many of a run's minutes started before ``moment``."""
    return -int(-(moment - start).total_seconds() // 60)


def _beat(first, last, phase):
    """Run the metering beat once a minute at second ``phase``, from the minute of ``first`` to ``last``."""
    at = first.replace(second=0, microsecond=0) + timedelta(seconds=phase)
    while at < last:
        if at >= first:
            with time_machine.travel(at, tick=False):
                meter()
        at += timedelta(minutes=1)


def _close(resource, ended_at, noticed_at=None):
    with time_machine.travel(noticed_at or ended_at, tick=False):
        close_usage(resource_id=resource, ended_at=ended_at)
    return UsageSession.objects.get(resource_id=resource)


@pytest.mark.parametrize("every", [1, 5])
@pytest.mark.parametrize("offset", START_OFFSETS)
@pytest.mark.parametrize("phase", BEAT_PHASES)
def test_every_minute_started_before_midnight_is_in_the_old_months_statement_and_subsidy(
    catalog, xinchuang_subsidy, owner, fund, settings, every, offset, phase
):
    settings.METERING_POSTING_MINUTES = every
    fund(owner, "100")
    start = MIDNIGHT - timedelta(minutes=12) + timedelta(seconds=offset)
    end = MIDNIGHT + timedelta(minutes=9, seconds=10)
    q = quote(chip=catalog["mlu370-x8"], cards=3, at=start)  # list ¥5.10/h: the user pays 4.59, Xinchuang 0.51
    resource = uuid.uuid4()
    open_usage(user=owner, kind="instance", resource_id=resource, quote=q, started_at=start, label="run")

    _beat(start, end, phase)
    session = _close(resource, end)

    in_march = _started_before(start, MIDNIGHT)
    total = _started_before(start, end)
    march, april = month_statement(owner, MARCH), month_statement(owner, APRIL)
    assert (march.minutes, april.minutes) == (in_march, total - in_march)
    assert march.charged == _cost("4.59", in_march)
    assert march.charged + april.charged == session.charged == _cost("4.59", total)
    subsidy = dict(SubsidyUsage.objects.filter(user=owner).values_list("month", "amount"))
    assert subsidy[MARCH] == march.subsidy == _cost("0.51", in_march)
    assert subsidy[MARCH] + subsidy[APRIL] == _cost("0.51", total)
    assert ledger.check() == []


@pytest.mark.parametrize("every", [1, 5])
@pytest.mark.parametrize("phase", BEAT_PHASES)
def test_across_a_price_change_at_midnight_each_run_keeps_the_price_it_started_at_and_its_minutes_months(
    catalog, owner, fund, settings, every, phase
):
    settings.METERING_POSTING_MINUTES = every
    fund(owner, "100")
    chip = catalog["a100-80g"]  # ¥4.80 an hour until midnight, ¥9.60 from then on
    Price.objects.create(chip=chip, per_hour=Decimal("9.6"), effective_from=MIDNIGHT)
    before = MIDNIGHT - timedelta(seconds=30.5)  # started in the last minute of March
    after = MIDNIGHT + timedelta(seconds=0.25)  # started at the new price
    runs = {}
    for started in (before, after):
        runs[started] = uuid.uuid4()
        q = quote(chip=chip, cards=1, at=started)
        open_usage(user=owner, kind="instance", resource_id=runs[started], quote=q, started_at=started)
    end = MIDNIGHT + timedelta(minutes=10)

    _beat(before, end, phase)
    old, new = (_close(runs[started], end) for started in (before, after))

    assert (old.payable_per_hour, new.payable_per_hour) == (Decimal("4.8"), Decimal("9.6"))
    assert (old.charged_minutes, new.charged_minutes) == (11, 10)
    assert (old.charged, new.charged) == (Decimal("0.88"), Decimal("1.60"))
    march, april = month_statement(owner, MARCH), month_statement(owner, APRIL)
    assert (march.minutes, march.charged) == (1, Decimal("0.08"))  # the old run's first minute, at the old price
    assert (april.minutes, april.charged) == (20, Decimal("0.80") + Decimal("1.60"))
    assert wallet.compute_balance(owner) == Decimal("100") - Decimal("2.48")
    assert ledger.check() == []


@pytest.mark.parametrize("every", [1, 5])
def test_minutes_charged_after_a_late_noticed_end_are_given_back(
    catalog, xinchuang_subsidy, owner, fund, settings, every
):
    settings.METERING_POSTING_MINUTES = every
    wallet.grant_trial_credit(owner, owner.email)  # ¥10 of trial credit pays first, then cash
    fund(owner, "100")
    start = datetime(2026, 3, 2, 9, 0, 0, tzinfo=SHANGHAI)
    q = quote(chip=catalog["mlu370-x8"], cards=3, at=start)
    resource = uuid.uuid4()
    open_usage(user=owner, kind="instance", resource_id=resource, quote=q, started_at=start)
    died = start + timedelta(minutes=140, seconds=20)  # spot reclaimed; reconcile sees it seven minutes later

    _beat(start, died + timedelta(minutes=7), 7)
    session = _close(resource, died, noticed_at=died + timedelta(minutes=7, seconds=2))

    # 141 started minutes, as the instance page shows it: ¥10.79 to pay (4.59/h), ¥1.20 subsidy (0.51/h)
    assert (session.charged_minutes, session.charged) == (141, Decimal("10.79"))
    assert session.subsidy_booked + session.subsidy_unfunded == Decimal("1.20")
    march = month_statement(owner, MARCH)
    assert (march.minutes, march.charged, march.subsidy) == (141, Decimal("10.79"), Decimal("1.20"))
    s = wallet.summary(owner)
    assert s.trial + s.cash == Decimal("110") - Decimal("10.79")
    xinchuang_subsidy.refresh_from_db()
    assert xinchuang_subsidy.spent == SubsidyUsage.objects.get(user=owner).amount == Decimal("1.20")
    back = LedgerTransaction.objects.get(usage_session=session, minutes__lt=0)  # one posting gave them back
    with translation.override("en"):
        assert back.user_amount > 0 and back.description.endswith("minutes after the end given back")
    # Closing again (a retried stop) gives back nothing more.
    assert close_usage(resource_id=resource, ended_at=died) is None
    assert wallet.summary(owner).cash == s.cash
    assert ledger.check() == []


def test_a_stop_noticed_after_midnight_gives_back_the_new_months_minutes_in_that_month(catalog, owner, fund):
    fund(owner, "100")
    start = MIDNIGHT - timedelta(minutes=30)
    q = quote(chip=catalog["a100-80g"], cards=1, at=start)  # 8 fen a minute
    resource = uuid.uuid4()
    open_usage(user=owner, kind="instance", resource_id=resource, quote=q, started_at=start)
    died = MIDNIGHT - timedelta(seconds=50)

    _beat(start, MIDNIGHT + timedelta(minutes=2), 7)
    _close(resource, died, noticed_at=MIDNIGHT + timedelta(minutes=2, seconds=1))

    march, april = month_statement(owner, MARCH), month_statement(owner, APRIL)
    assert (march.minutes, march.charged) == (30, Decimal("2.40"))
    assert (april.minutes, april.charged) == (0, Decimal("0"))
    assert wallet.compute_balance(owner) == Decimal("97.60")
    assert ledger.check() == []


def test_the_statement_counts_minutes_whose_charge_rounds_to_nothing(catalog, owner, fund):
    fund(owner, "100")
    start = datetime(2026, 3, 2, 9, 0, 0, tzinfo=SHANGHAI)
    q = quote(chip=catalog["a100-80g"], cards=1, at=start)
    short, cheap = uuid.uuid4(), uuid.uuid4()
    for resource in (short, cheap):
        open_usage(user=owner, kind="disk", resource_id=resource, quote=q, started_at=start)
    # ¥0.10 an hour: two minutes cost ¥0.0033, which rounds to ¥0.00; thirteen minutes ¥0.0217 → ¥0.02
    UsageSession.objects.update(payable_per_hour=Decimal("0.10"))

    _beat(start, start + timedelta(minutes=13), 7)
    _close(short, start + timedelta(minutes=1, seconds=30))
    _close(cheap, start + timedelta(minutes=12, seconds=40))

    lines = {line.resource_id: (line.minutes, line.charged) for line in month_statement(owner, MARCH).lines}
    assert lines == {short: (2, Decimal("0.00")), cheap: (13, Decimal("0.02"))}
    assert month_statement(owner, MARCH).minutes == 15
    assert ledger.check() == []


def test_a_months_minutes_that_round_to_nothing_are_counted_in_that_month(catalog, owner, fund):
    fund(owner, "100")
    start = MIDNIGHT - timedelta(minutes=3, seconds=15)
    q = quote(chip=catalog["a100-80g"], cards=1, at=start)
    resource = uuid.uuid4()
    open_usage(user=owner, kind="disk", resource_id=resource, quote=q, started_at=start)
    UsageSession.objects.update(payable_per_hour=Decimal("0.10"))  # 4 minutes in March: ¥0.0067 → ¥0.01

    _beat(start, MIDNIGHT + timedelta(minutes=20), 59.9)
    _close(resource, MIDNIGHT + timedelta(minutes=20))

    march, april = month_statement(owner, MARCH), month_statement(owner, APRIL)
    assert march.minutes == 4 and april.minutes == 20
    assert march.charged + april.charged == _cost("0.10", 24)
    assert ledger.check() == []


@pytest.mark.parametrize("expired_meanwhile", [False, True])
def test_minutes_a_voucher_paid_past_a_late_noticed_end_go_back_to_it_or_to_cash_once_it_has_expired(
    catalog, owner, fund, settings, expired_meanwhile
):

    settings.METERING_POSTING_MINUTES = 1
    fund(owner, "100")
    start = datetime(2026, 3, 2, 9, 0, 0, tzinfo=SHANGHAI)
    with time_machine.travel(start - timedelta(hours=1), tick=False):
        batch = vouchers.create_batch(
            name="Launch week",
            name_zh="体验周",
            amount=Decimal("50"),
            expires_at=start + timedelta(minutes=30),
            quantity=1,
            min_spend=Decimal("0"),
            one_per_user=True,
            chips=Chip.objects.none(),
            plans=Plan.objects.none(),
            shared_code="",
        )
        vouchers.redeem(owner, vouchers.display_code(batch.codes.get().code), by=owner)
    q = quote(chip=catalog["a100-80g"], cards=1, at=start)  # 8 fen a minute, paid by the voucher
    resource = uuid.uuid4()
    open_usage(user=owner, kind="instance", resource_id=resource, quote=q, started_at=start)
    died = start + timedelta(minutes=14, seconds=30)  # 15 started minutes

    _beat(start, start + timedelta(minutes=20), 7)  # 20 minutes charged: 5 past the end
    noticed = start + timedelta(minutes=20, seconds=30)
    if expired_meanwhile:  # noticed only after the voucher expired and what was left on it was taken
        noticed = start + timedelta(minutes=31)
        vouchers.expire_vouchers(noticed)
    _close(resource, died, noticed_at=noticed)

    voucher = Account.objects.get(user=owner, kind="user_voucher")
    if expired_meanwhile:  # the voucher can no longer be spent: its 5 minutes go to cash
        assert (voucher.balance, wallet.summary(owner).cash) == (Decimal("0"), Decimal("100.40"))
        assert Voucher.objects.get(user=owner).expired_at is not None
    else:
        assert (voucher.balance, wallet.summary(owner).cash) == (Decimal("50") - Decimal("1.20"), Decimal("100"))
    assert (month_statement(owner, MARCH).minutes, month_statement(owner, MARCH).charged) == (15, Decimal("1.20"))
    assert ledger.check() == []
