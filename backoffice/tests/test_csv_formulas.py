"""The subsidy reconciliation CSV opens in a spreadsheet as data: a user's instance name never runs as a formula."""

import csv
import io
from datetime import timedelta

import pytest
import time_machine
from django.urls import reverse
from django.utils import timezone

from billing import metering
from instances import launching
from instances.tests.fixtures import settle

pytestmark = pytest.mark.django_db


def test_the_reconciliation_csv_neutralises_an_instance_name_that_starts_like_a_formula(
    client, finance_user, owner, fund, catalog, instant
):
    fund(owner, "500")
    start = timezone.localtime().replace(day=1, hour=9, minute=0, second=0, microsecond=0)
    with time_machine.travel(start, tick=False) as clock:
        request = launching.LaunchRequest(
            name="=cmd|' /C calc'!A0", chip="ascend-910b", image="pytorch-2.2-cann8", plan="payg"
        )
        launching.launch(owner, request)
        settle()
        clock.shift(timedelta(minutes=30))
        metering.meter()
    client.force_login(finance_user)

    response = client.get(reverse("ops:reconciliation-csv"), {"month": f"{start:%Y-%m}"})

    rows = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert [r["instance"] for r in rows[:-1]] == ["'=cmd|' /C calc'!A0"]
    assert float(rows[-1]["subsidy_cny"]) > 0
