"""Inference endpoints: platform time from deploy to ready on the embedded default (SPEC §9: ≤ 30 s), through a
real Celery worker with the simulated backend's default pull and boot timings."""

import os
import subprocess
import sys
import time
from pathlib import Path

from django.conf import settings

from accounts.models import WorkerHeartbeat
from bench import benchmark, size
from bench.instances import _user
from inference import services as endpoints
from inference import template_catalog as inference
from instances import conf
from instances.models import Instance
from marketplace import seed as hub_catalog
from marketplace.images import catalog as image_catalog

DEPLOYS = size(3, 1)


def _catalogues() -> None:
    hub_catalog.load()
    image_catalog.load()
    inference.load()


def _worker():
    log = open(Path(settings.DATA_DIR) / "bench-endpoint-worker.log", "wb")  # noqa: SIM115 (closed by the caller)
    cmd = [sys.executable, "-m", "celery", "-A", "config", "worker", "-l", "WARNING", "-c", "2", "-n", "bench-ep@%h"]
    worker = subprocess.Popen(cmd, env=os.environ.copy(), cwd=settings.BASE_DIR, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while not WorkerHeartbeat.objects.filter(hostname__startswith="bench-ep@").exists():
        if time.monotonic() > deadline:
            raise RuntimeError("the bench worker did not start")
        time.sleep(0.2)
    return worker, log


@benchmark("Inference: deploy a template → endpoint ready (embedded default)", quick=False)
def deploy_to_ready(report):
    for name in ("INSTANCES_SIM_PULL_SECONDS", "INSTANCES_SIM_BOOT_SECONDS"):
        os.environ.pop(name, None)  # the defaults, as `make run` has them
    simulated = conf.sim_pull_seconds() + conf.sim_boot_seconds()
    _catalogues()
    user = _user("bench-endpoints@example.com")
    worker, log = _worker()
    totals = []
    try:
        for _run in range(DEPLOYS):
            start = time.perf_counter()
            endpoint = endpoints.deploy(user, endpoints.DeployRequest(template="qwen2.5-0.5b-instruct-vllm"))
            while Instance.objects.filter(pk=endpoint.instance_id, status="running").count() == 0:
                if time.perf_counter() - start > 120:
                    raise RuntimeError("the endpoint did not become ready within 2 minutes")
                time.sleep(0.05)
            totals.append(time.perf_counter() - start)
    finally:
        worker.terminate()
        worker.wait(timeout=30)
        log.close()
    runs = f"{DEPLOYS} deploy{'s' if DEPLOYS > 1 else ''}"
    note = f"{runs}, real worker; simulated pull + boot {simulated:g} s (defaults)"
    report.add("deploy → ready, mean", sum(totals) / len(totals), unit="s", note=note)
    report.add("deploy → ready, worst", max(totals), unit="s", note="target ≤ 30 s")
    report.add(
        "platform overhead (mean − simulated boot)",
        sum(totals) / len(totals) - simulated,
        unit="s",
        note="checks, reserve, enqueue, worker pickup, polling",
    )
