"""Chart axes read the reader's local time (Asia/Shanghai), like the events and transactions beside them."""

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
import time_machine
from django.urls import reverse
from django.utils import timezone

from backoffice import reports
from inference import services as endpoints
from instances.tests.fixtures import settle

pytestmark = pytest.mark.django_db

SHANGHAI = ZoneInfo("Asia/Shanghai")


def _minutes(now: datetime, tz, back: int = 31) -> set[str]:
    return {(now - timedelta(minutes=m)).astimezone(tz).strftime("%H:%M") for m in range(-1, back)}


def test_the_metrics_chart_labels_minutes_in_shanghai_time(owner_client, launch):
    instance = launch()
    settle()

    data = owner_client.get(reverse("instances:metrics", args=[instance.public_id])).json()

    now = timezone.now()
    assert data["labels"] and set(data["labels"]) <= _minutes(now, SHANGHAI)
    assert not set(data["labels"]) & _minutes(now, UTC)


def test_the_endpoint_request_chart_labels_minutes_in_shanghai_time(owner, owner_client, deploy):
    endpoint = deploy(owner)
    at = datetime(2026, 3, 2, 1, 5, tzinfo=UTC)  # 09:05 in Shanghai
    with time_machine.travel(at, tick=False):
        endpoints.log_request(endpoint, None, path="chat/completions", status_code=200, latency_ms=5, usage={})
        chart = owner_client.get(f"/endpoints/{endpoint.public_id}/chart/").json()

    assert chart["labels"] == ["09:05"]


def test_the_capacity_chart_labels_slots_in_shanghai_time_and_names_its_chips(catalog):
    at = datetime(2026, 3, 2, 1, 5, tzinfo=UTC)
    reports.record_capacity_snapshot(at)

    with time_machine.travel(at + timedelta(minutes=1), tick=False):
        series = reports.capacity_series()

    assert series["labels"] == ["03-02 09:05"]
    assert "Ascend 910B" in {d["label"] for d in series["datasets"]}
    assert "ascend-910b" not in {d["label"] for d in series["datasets"]}
