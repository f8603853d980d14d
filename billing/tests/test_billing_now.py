"""The wallet cards say what bills by the hour: a kept cloud disk is not "running"."""

import uuid

import pytest
from django.utils import timezone

from billing.metering import open_usage
from billing.quote import quote
from catalog.models import Zone
from storage import disks

pytestmark = pytest.mark.django_db


@pytest.fixture
def only_a_disk(owner, catalog, fund):
    fund(owner, "50")
    return disks.create(owner, name="ckpt", size_gb=100, zone=Zone.objects.get(slug="cn-east-xc"))


def test_the_dashboard_says_an_idle_disk_bills_not_that_something_runs(owner_client, only_a_disk):
    html = owner_client.get("/console/").content.decode()

    assert "当前计费：每小时 ¥0.041667（云硬盘 1 块）" in html
    assert "运行" not in html.split('id="wallet-billing-now"')[1].split("</span>")[0]


def test_the_wallet_page_says_the_same_in_english(owner_client, only_a_disk):
    owner_client.cookies["django_language"] = "en"

    html = owner_client.get("/billing/").content.decode()

    assert "Billing now: ¥0.041667 an hour for 1 cloud disk" in html and "Running now" not in html


def test_running_instances_and_disks_are_named_together(owner_client, owner, catalog, only_a_disk):
    q = quote(chip=catalog["ascend-910b"], cards=1)
    open_usage(user=owner, kind="instance", resource_id=uuid.uuid4(), quote=q, started_at=timezone.now())
    owner_client.cookies["django_language"] = "en"

    html = owner_client.get("/billing/").content.decode()

    assert "an hour for 1 running instance, 1 cloud disk" in html
