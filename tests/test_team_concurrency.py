"""Twenty members of one team launch at the same moment on a team balance that covers five: five start, the rest are
refused, and metering then spends no more than the balance plus the arrears margin (one metering period of what
runs, and a fen of rounding per session); the ledger checks out."""

from datetime import timedelta
from decimal import Decimal

import pytest
import time_machine
from django.core.management import call_command
from django.db import connection
from django.utils import timezone

from billing import metering, wallet
from billing.models import LedgerTransaction
from core.errors import PaymentRequired
from instances import launching
from instances.models import Instance
from instances.tests.fixtures import settle
from teams import services as teams
from teams.models import Membership
from teams.roles import Role
from tests.fixtures.concurrency import race
from tests.fixtures.factories import UserFactory, top_up

CHIP, IMAGE = "mlu370-x8", "pytorch-2.2-neuware"
MEMBERS, COVERED = 20, 5


def _request(name):
    return launching.LaunchRequest(name=name, chip=CHIP, image=IMAGE)


def _twenty_members_launch_at_once(owner):
    team = teams.create_team(owner, name="Race lab", slug="race-lab")
    members = []
    for i in range(MEMBERS):
        member = UserFactory(email=f"member-{i}@example.com")
        Membership.objects.create(team=team, user=member, role=Role.DEVELOPER)
        members.append(member)
    rate = launching.preview(team.account, _request("x")).payable_per_hour
    balance = (rate * COVERED).quantize(Decimal("0.01"))
    top_up(team.account, str(balance))

    with time_machine.travel(timezone.now(), tick=False) as clock:
        results = race([lambda m=m: launching.launch(team.account, _request(f"run-{m.pk}"), by=m) for m in members])
        won = [r for r in results if isinstance(r, Instance)]
        refused = [r for r in results if isinstance(r, PaymentRequired)]
        assert len(won) + len(refused) == MEMBERS, results
        assert len(won) == COVERED
        assert {i.launched_by_id for i in won} <= {m.pk for m in members}
        assert Instance.objects.filter(owner=team.account).count() == COVERED

        settle()
        for _minute in range(75):  # the balance lasts an hour; the beat meters every minute
            clock.shift(timedelta(minutes=1))
            metering.meter()
            settle()
        assert not Instance.objects.filter(owner=team.account, status="running").exists()

    spent = -sum(
        LedgerTransaction.objects.filter(user=team.account, kind="usage").values_list("user_amount", flat=True)
    )
    margin = (rate * COVERED / 60).quantize(Decimal("0.01")) + Decimal("0.01") * COVERED
    assert balance <= spent <= balance + margin
    assert wallet.summary(team.account).cash >= -margin
    assert set(LedgerTransaction.objects.filter(user=team.account, kind="usage").values_list("member", flat=True)) <= {
        i.launched_by_id for i in won
    }
    call_command("check_ledger")


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_twenty_members_racing_spend_no_more_than_the_team_balance_on_postgresql(owner, catalog, instant):
    assert connection.vendor == "postgresql"
    _twenty_members_launch_at_once(owner)


@pytest.mark.django_db(transaction=True)
def test_twenty_members_racing_spend_no_more_than_the_team_balance_on_sqlite(owner, catalog, instant):
    if connection.vendor != "sqlite":
        pytest.skip("the PostgreSQL twin of this test runs there")
    _twenty_members_launch_at_once(owner)
