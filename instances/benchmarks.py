"""Instance benchmarks: the launch API's latency, and launches per second through a real Celery worker."""

import os
import subprocess
import sys
import time
import uuid
from decimal import Decimal
from pathlib import Path

from django.conf import settings
from django.test import Client

from billing import wallet
from config.celery import app
from console import services as console_services
from console.bench import benchmark
from console.models import User, WorkerHeartbeat
from instances import services
from instances.models import Chip, Instance, Zone

LAUNCHES = 200
THROUGHPUT_LAUNCHES = 100


def _user(email: str):
    user, _created = User.objects.get_or_create(email=email)
    wallet.adjust_balance(user=user, amount=Decimal("100000"), reason="bench", staff=None,
                          idempotency_key=f"bench:{uuid.uuid4()}")  # fmt: skip
    return user


def _capacity(cards: int) -> None:
    """Enough 910B cards in the Xinchuang zone for the run (the bench database is thrown away afterwards)."""
    zone, chip = Zone.objects.get(slug="cn-east-xc"), Chip.objects.get(slug="ascend-910b")
    for n in range(cards // 8 + 1):
        name = f"bench-{uuid.uuid4().hex[:8]}-{n}"
        services.add_node(zone=zone, chip=chip, name=name, cards=8)


@benchmark("Instances: POST /api/v1/instances (launch)")
def launch_api(report):
    os.environ.update({"INSTANCES_SIM_PULL_SECONDS": "0", "INSTANCES_SIM_BOOT_SECONDS": "0"})
    _capacity(LAUNCHES)
    user = _user("bench-launch@example.com")
    token = console_services.create_api_token(user, name="bench", scope="read_write").plaintext
    client = Client(HTTP_AUTHORIZATION=f"Bearer {token}")
    body = {"chip": "ascend-910b", "cards": 1, "image": "pytorch-2.2-cann8", "name": "bench"}
    durations = []
    for _ in range(LAUNCHES):
        with report.timer() as t:
            response = client.post("/api/v1/instances", body, content_type="application/json")
        assert response.status_code == 201, response.content
        durations.append(t.seconds)
    report.add_latencies("launch server time", durations, note="in-process client; quote, funds, reserve, enqueue")
    app.control.purge()  # these launches' provisioning is not part of this benchmark


@benchmark("Instances: launches through the worker until running", quick=False)
def launches_through_worker(report):
    env = os.environ | {"INSTANCES_SIM_PULL_SECONDS": "0", "INSTANCES_SIM_BOOT_SECONDS": "0"}
    os.environ.update({"INSTANCES_SIM_PULL_SECONDS": "0", "INSTANCES_SIM_BOOT_SECONDS": "0"})
    _capacity(THROUGHPUT_LAUNCHES)
    user = _user("bench-worker@example.com")
    log = open(Path(settings.DATA_DIR) / "bench-worker.log", "wb")  # noqa: SIM115 (closed below)
    cmd = [sys.executable, "-m", "celery", "-A", "config", "worker", "-l", "WARNING", "-c", "2", "-n", "bench@%h"]
    worker = subprocess.Popen(cmd, env=env, cwd=settings.BASE_DIR, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while not WorkerHeartbeat.objects.filter(hostname__startswith="bench@").exists():
            if time.monotonic() > deadline:
                raise RuntimeError("the bench worker did not start")
            time.sleep(0.2)
        request = services.LaunchRequest(name="bench-w", chip="ascend-910b", image="pytorch-2.2-cann8")
        start = time.perf_counter()
        ids = [services.launch(user, request).pk for _ in range(THROUGHPUT_LAUNCHES)]
        while Instance.objects.filter(pk__in=ids, status="running").count() < len(ids):
            if time.perf_counter() - start > 300:
                raise RuntimeError("launches did not all reach running within 5 minutes")
            time.sleep(0.05)
        seconds = time.perf_counter() - start
    finally:
        worker.terminate()
        worker.wait(timeout=30)
        log.close()
    broker = settings.CELERY_BROKER_URL.split("://", 1)[0]
    note = f"{THROUGHPUT_LAUNCHES} launches, 1 worker × 2 processes, {broker} broker, simulated timings 0"
    report.add("launches per second", THROUGHPUT_LAUNCHES / seconds, unit="/s", note=note)
