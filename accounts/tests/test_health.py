"""/healthz reports the database, the broker and a worker heartbeat."""

from datetime import timedelta

import pytest
from django.utils import timezone

from accounts import services
from accounts.models import WorkerHeartbeat

pytestmark = pytest.mark.django_db


def test_health_is_degraded_until_a_worker_reports(client):
    response = client.get("/healthz")
    assert response.status_code == 503
    body = response.json()
    assert body["database"]["ok"] and body["broker"]["ok"]
    assert body["worker"]["ok"] is False and body["status"] == "degraded"


def test_health_is_ok_with_a_fresh_heartbeat(client):
    services.record_heartbeat("worker@test")
    body = client.get("/healthz").json()
    assert body["status"] == "ok" and body["worker"]["hostname"] == "worker@test"


def test_a_stale_heartbeat_means_the_worker_is_reported_dead(client, settings):
    WorkerHeartbeat.objects.create(
        hostname="worker@old",
        beat_at=timezone.now() - timedelta(seconds=settings.WORKER_HEARTBEAT_STALE_SECONDS + 5),
        beats=1,
    )
    response = client.get("/healthz")
    assert response.status_code == 503 and response.json()["worker"]["ok"] is False


def test_heartbeats_count_per_worker(db):
    services.record_heartbeat("a")
    services.record_heartbeat("a")
    services.record_heartbeat("b")
    assert dict(WorkerHeartbeat.objects.values_list("hostname", "beats")) == {"a": 2, "b": 1}
