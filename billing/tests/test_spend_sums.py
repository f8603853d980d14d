"""The running sums of spend (per quarter-hour, per statement line) equal the ledger, across a month boundary and
for a database whose ledger was written before they existed; the wallet and the statement read them."""

import importlib
import uuid
from datetime import date, datetime, timedelta
from decimal import Decimal
from zoneinfo import ZoneInfo

import pytest
import time_machine
from django.apps import apps
from django.core.management import call_command

from billing import ledger, spend, statements, wallet
from billing.choices import AccountKind
from billing.metering import close_usage, meter, open_usage
from billing.models import LedgerTransaction, SpendLine, SpendQuarter
from billing.quote import quote

pytestmark = pytest.mark.django_db

SHANGHAI = ZoneInfo("Asia/Shanghai")
# Ten minutes before midnight, local time, on the last day of March: the run crosses into April.
START = datetime(2026, 3, 31, 23, 50, 0, tzinfo=SHANGHAI)


def _run_across_the_month(user, q, minutes: int = 20):
    resource = uuid.uuid4()
    open_usage(user=user, kind="instance", resource_id=resource, quote=q, started_at=START, label="across")
    at = START + timedelta(seconds=7)
    end = START + timedelta(minutes=minutes)
    while at < end:
        with time_machine.travel(at, tick=False):
            meter()
        at += timedelta(seconds=60)
    with time_machine.travel(end, tick=False):
        close_usage(resource_id=resource, ended_at=end)
    return resource


def _ledger_spend(user, since, until) -> Decimal:
    rows = LedgerTransaction.objects.filter(user=user, kind="usage", created_at__gte=since, created_at__lt=until)
    return -sum((tx.user_amount for tx in rows), Decimal("0"))


def test_a_run_across_midnight_splits_between_the_months_as_the_ledger_does(catalog, owner, fund):
    fund(owner, Decimal("100"))
    resource = _run_across_the_month(owner, quote(chip=catalog["a100-80g"], cards=1, at=START))
    assert ledger.check() == []

    march, april = date(2026, 3, 1), date(2026, 4, 1)
    march_end = datetime(2026, 4, 1, tzinfo=SHANGHAI)
    in_march = _ledger_spend(owner, datetime(2026, 3, 1, tzinfo=SHANGHAI), march_end)
    in_april = _ledger_spend(owner, march_end, datetime(2026, 5, 1, tzinfo=SHANGHAI))
    assert in_march > 0 and in_april > 0
    assert spend.month_spent(owner, march) == in_march
    assert spend.month_spent(owner, april) == in_april
    with time_machine.travel(datetime(2026, 4, 1, 0, 30, tzinfo=SHANGHAI), tick=False):
        assert wallet.month_spent(owner) == in_april
        days = dict(wallet.daily_spend(owner, days=2))
    assert days == {march_end.date() - timedelta(days=1): in_march, march_end.date(): in_april}

    # A page that shows both reads the quarters once: the same month and the same days.
    with time_machine.travel(datetime(2026, 4, 1, 0, 30, tzinfo=SHANGHAI), tick=False):
        recent = wallet.recent_spend(owner)
        assert wallet.summary(owner, recent=recent).month_spent == in_april
        assert dict(wallet.daily_spend(owner, days=2, recent=recent)) == days

    march_lines = statements.month_statement(owner, march).lines
    assert [(line.resource_id, line.charged) for line in march_lines] == [(resource, in_march)]
    assert statements.month_statement(owner, april).charged == in_april


def test_the_one_read_counts_a_month_longer_than_the_chart(catalog, owner, fund):
    fund(owner, Decimal("100"))
    first_of_may = datetime(2026, 5, 1, 10, 0, tzinfo=SHANGHAI)
    resource = uuid.uuid4()
    open_usage(
        user=owner,
        kind="instance",
        resource_id=resource,
        quote=quote(chip=catalog["a100-80g"], cards=1, at=first_of_may),
        started_at=first_of_may,
    )
    with time_machine.travel(first_of_may + timedelta(minutes=30), tick=False):
        close_usage(resource_id=resource, ended_at=first_of_may + timedelta(minutes=30))
    spent = spend.month_spent(owner, date(2026, 5, 1))
    assert spent > 0

    # On the 31st the chart's thirty days start on the 2nd; the month's spend still counts the 1st.
    with time_machine.travel(datetime(2026, 5, 31, 12, 0, tzinfo=SHANGHAI), tick=False):
        recent = wallet.recent_spend(owner)
        assert wallet.summary(owner, recent=recent).month_spent == spent == wallet.summary(owner).month_spent
        days = wallet.daily_spend(owner, recent=recent)
    assert days[0][0] == date(2026, 5, 2) and sum(amount for _day, amount in days) == 0


def test_a_ledger_written_before_the_sums_existed_is_summed_by_the_migration(catalog, owner, stranger, fund):
    fund(owner, Decimal("100"))
    fund(stranger, Decimal("100"))
    _run_across_the_month(owner, quote(chip=catalog["a100-80g"], cards=1, at=START))
    _run_across_the_month(stranger, quote(chip=catalog["mlu370-x8"], cards=2, at=START), minutes=5)
    expected = {(q.user_id, q.start, q.amount_fen) for q in SpendQuarter.objects.all()}
    assert expected
    SpendQuarter.objects.all().delete()  # as before the migration
    SpendLine.objects.all().delete()
    assert spend.check() != []

    importlib.import_module("billing.migrations.0012_spend_sums").fill(apps, None)
    assert spend.check() == []
    assert {(q.user_id, q.start, q.amount_fen) for q in SpendQuarter.objects.all()} == expected


def test_check_ledger_rebuilds_the_sums_on_request(catalog, owner, fund):

    fund(owner, Decimal("100"))
    _run_across_the_month(owner, quote(chip=catalog["a100-80g"], cards=1, at=START), minutes=3)
    SpendLine.objects.all().delete()
    with pytest.raises(Exception, match="ledger problem"):
        call_command("check_ledger")
    call_command("check_ledger", "--rebuild-spend")
    assert SpendLine.objects.filter(user=owner).exists()


def test_a_deleted_members_lines_join_the_unnamed_ones_as_in_the_ledger(owner, stranger):

    resource, month = uuid.uuid4(), date(2026, 3, 1)
    gone = stranger.pk + 1000  # a member whose account no longer exists
    for member, fen in ((0, -300), (gone, -200), (stranger.pk, -100)):
        SpendLine.objects.create(
            user=owner, month=month, resource_id=resource, kind="usage", member_id=member, minutes=3, amount_fen=fen
        )
    rows = statements.grouped_rows(owner, month)
    assert [(r["member__email"], r["charged"], r["minutes"]) for r in rows] == [
        (None, Decimal("-5.00"), 6),
        (stranger.email, Decimal("-1.00"), 3),
    ]


def test_a_charge_in_the_last_instant_of_a_month_stays_in_it_when_the_migration_sums_the_ledger(owner, fund):

    fund(owner, Decimal("10"))
    cash = ledger.user_accounts([owner.pk])[owner.pk][AccountKind.USER_CASH]
    revenue = ledger.system_account(AccountKind.REVENUE)
    last_instant = datetime(2026, 3, 31, 23, 59, 59, 999_700, tzinfo=SHANGHAI)  # rounds up to April in milliseconds
    ledger.post_batch(
        [
            ledger.Posting(
                kind="usage",
                idempotency_key="last-instant",
                user_id=owner.pk,
                entries=((cash.pk, Decimal("-1.00")), (revenue.pk, Decimal("1.00"))),
                resource_id=uuid.uuid4(),
                minutes=1,
                at=last_instant,
            )
        ]
    )
    assert spend.month_spent(owner, date(2026, 3, 1)) == Decimal("1.00")
    SpendQuarter.objects.all().delete()
    SpendLine.objects.all().delete()
    importlib.import_module("billing.migrations.0012_spend_sums").fill(apps, None)
    assert spend.check() == []
    assert spend.month_spent(owner, date(2026, 3, 1)) == Decimal("1.00")
