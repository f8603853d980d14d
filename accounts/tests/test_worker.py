"""A real Celery worker executes tasks, on the embedded broker and on Redis, exactly once each."""

import pytest
from django.db.models import Sum
from kombu import Connection

from accounts.models import WorkerHeartbeat
from config.broker import filesystem_transport_options
from config.celery import app
from tests.fixtures.services import redis_url, wait_until


def total_beats():
    return WorkerHeartbeat.objects.aggregate(n=Sum("beats"))["n"] or 0


def send_heartbeats(connection, n):
    with connection:
        for _ in range(n):
            app.send_task("accounts.tasks.heartbeat", connection=connection)


def test_two_worker_processes_share_the_embedded_broker_and_run_each_task_once(worker_process, tmp_path):
    # Given two worker processes and a producer (this test) on the filesystem broker, with no server at all
    broker_dir = tmp_path / "broker"
    worker_process(broker_url="filesystem://", name="w1", data_dir=tmp_path)
    worker_process(broker_url="filesystem://", name="w2", data_dir=tmp_path)
    # each worker announces itself with one heartbeat when ready
    wait_until(lambda: WorkerHeartbeat.objects.count() == 2, timeout=60, message="both workers to start")

    # When 40 tasks are sent
    send_heartbeats(Connection("filesystem://", transport_options=filesystem_transport_options(broker_dir)), 40)

    # Then every one runs, and none runs twice
    wait_until(lambda: total_beats() == 42, timeout=60, message="42 heartbeats")
    wait_until(lambda: not any((broker_dir / "queue").iterdir()), timeout=10, message="an empty queue")
    assert total_beats() == 42


def test_health_turns_green_once_a_real_worker_runs(worker_process, client, tmp_path):
    assert client.get("/healthz").status_code == 503
    worker_process(broker_url="filesystem://", name="solo", data_dir=tmp_path)
    wait_until(lambda: client.get("/healthz").status_code == 200, timeout=60, message="/healthz to be ok")


@pytest.mark.redis
def test_a_worker_on_redis_runs_each_task_once(worker_process, tmp_path):
    url = redis_url()
    with Connection(url) as conn:
        conn.default_channel.client.delete("celery")  # a clean queue for this test
    worker_process(broker_url=url, name="r1", concurrency=2, data_dir=tmp_path)
    wait_until(lambda: total_beats() == 1, timeout=60, message="the worker to start")
    send_heartbeats(Connection(url), 20)
    wait_until(lambda: total_beats() == 21, timeout=60, message="21 heartbeats")
    assert WorkerHeartbeat.objects.get().hostname.startswith("r1@")
