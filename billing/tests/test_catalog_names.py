"""Statements and the back office's revenue show chip, zone and plan names, not the slugs the ledger keeps."""

import csv
import io
import uuid
from datetime import timedelta

import pytest
import time_machine
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from billing.metering import close_usage, open_usage
from billing.quote import quote
from catalog.models import Zone

pytestmark = pytest.mark.django_db


@pytest.fixture
def ran_910b(owner, catalog, fund):
    """An hour of one 910B card in the Xinchuang zone, pay-as-you-go, earlier this month."""
    fund(owner, "50")
    start = timezone.localtime().replace(day=1, hour=9, minute=0, second=0, microsecond=0)
    zone = Zone.objects.get(slug="cn-east-xc")
    q = quote(chip=catalog["ascend-910b"], cards=1, zone=zone, at=start)
    resource = uuid.uuid4()
    open_usage(user=owner, kind="instance", resource_id=resource, quote=q, started_at=start, label="llama-ft")
    with time_machine.travel(start + timedelta(minutes=60), tick=False):
        close_usage(resource_id=resource, ended_at=start + timedelta(minutes=60))
    return start


def test_the_statement_names_the_chip_zone_and_plan_in_chinese(owner_client, ran_910b):
    html = owner_client.get(reverse("billing:statements"), {"month": ran_910b.strftime("%Y-%m")}).content.decode()

    assert "昇腾 910B × 1" in html and "信创专区" in html and "按量计费（按分钟）" in html
    assert "ascend-910b" not in html and "cn-east-xc" not in html and "payg" not in html


def test_the_statement_names_the_chip_in_english_and_its_csv_keeps_the_slug_beside_the_name(owner_client, ran_910b):
    owner_client.cookies["django_language"] = "en"
    month = ran_910b.strftime("%Y-%m")

    html = owner_client.get(reverse("billing:statements"), {"month": month}).content.decode()
    rows = list(
        csv.reader(io.StringIO(owner_client.get(f"/billing/statements/?month={month}&format=csv").content.decode()))
    )

    assert "Ascend 910B × 1" in html and "ascend-910b" not in html
    assert rows[0][3] == "Chip" and rows[0][-3:] == ["Chip name", "Zone", "Plan"]
    assert rows[1][3] == "ascend-910b" and rows[1][-3:] == [
        "Ascend 910B",
        "Xinchuang zone",
        "Pay-as-you-go (per minute)",
    ]


def test_the_revenue_breakdowns_name_the_chip_zone_and_plan(client, finance_user, ran_910b):
    client.force_login(finance_user)

    html = client.get(reverse("ops:revenue")).content.decode()

    assert "昇腾 910B" in html and "信创专区" in html and "按量计费（按分钟）" in html
    assert "ascend-910b" not in html and "cn-east-xc" not in html and ">payg<" not in html


def test_a_chip_or_zone_renamed_in_the_admin_shows_on_the_next_statement(owner_client, ran_910b, catalog):
    month = {"month": ran_910b.strftime("%Y-%m")}
    owner_client.cookies["django_language"] = "en"
    assert "Ascend 910B × 1" in owner_client.get(reverse("billing:statements"), month).content.decode()

    chip = catalog["ascend-910b"]
    chip.name = "Ascend 910B Pro"
    chip.save()  # as the admin saves it
    assert "Ascend 910B Pro × 1" in owner_client.get(reverse("billing:statements"), month).content.decode()
    zone = Zone.objects.get(slug="cn-east-xc")
    zone.name = "Innovation zone"
    zone.save()
    assert "Innovation zone" in owner_client.get(reverse("billing:statements"), month).content.decode()


def test_the_statement_names_chips_zones_and_plans_with_one_look_at_the_price_version(owner_client, ran_910b):

    month = {"month": ran_910b.strftime("%Y-%m")}
    owner_client.get(reverse("billing:statements"), month)
    with CaptureQueriesContext(connection) as read:
        owner_client.get(reverse("billing:statements"), month)
    assert sum("pricebookversion" in query["sql"].lower() for query in read.captured_queries) == 1
