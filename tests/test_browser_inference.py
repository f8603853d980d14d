"""In real headless Chromium with a real Celery worker process: from a hub model page, deploy it as an API, watch
the endpoint become ready, create a key, call it with the curl example the page shows (real curl against the live
server, through the console's proxy to the simulated model), and see the request in the endpoint's chart and log.
"""

import subprocess
from decimal import Decimal
from pathlib import Path

import pytest
from django.conf import settings

from accounts.models import WorkerHeartbeat
from billing import wallet
from inference.models import EndpointRequest
from tests.fixtures.services import log_in, screenshot, wait_until

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def quick_backend(monkeypatch):
    for name in ("PULL", "BOOT"):
        monkeypatch.setenv(f"INSTANCES_SIM_{name}_SECONDS", "1")
    monkeypatch.setenv("INSTANCES_STOP_GRACE_SECONDS", "1")
    queue = Path(settings.DATA_DIR) / "broker" / "queue"
    for message in queue.glob("*") if queue.exists() else []:
        message.unlink(missing_ok=True)


def test_deploy_a_hub_model_as_an_api_call_it_with_curl_and_see_the_request(
    page, live_server, owner, inference_catalog, quick_backend, worker_process
):
    wallet.adjust_balance(user=owner, amount=Decimal("100"), reason="browser test", staff=None, idempotency_key="bi")
    worker_process(name="browser-inference")
    wait_until(lambda: WorkerHeartbeat.objects.exists(), timeout=60, message="the worker to start")
    log_in(page, live_server, owner)

    # From the hub model's page: "Deploy as API" with vLLM, on the cheapest compatible chip
    page.goto(f"{live_server.url}/marketplace/hub/Qwen/Qwen2.5-0.5B-Instruct")
    screenshot(page, "inference-01-hub-model")
    page.click('a.deploy-api[data-template="qwen2.5-0.5b-instruct-vllm"]')
    page.wait_for_url("**/endpoints/deploy/qwen2.5-0.5b-instruct-vllm/")
    page.click("#deploy-button")
    page.wait_for_url("**/endpoints/*-*/")

    # Ready without reloading; the page says the model is simulated
    page.wait_for_selector('#endpoint-badge[data-status="running"]', timeout=30_000)
    assert page.locator("#simulated-label").is_visible()
    screenshot(page, "inference-02-running")

    # A key, shown once, right inside the curl example
    page.click("#create-key-button")
    page.wait_for_selector("#new-key")
    assert page.locator("#key-list tr").count() == 1
    example = page.locator("#curl-example").inner_text()
    assert "sk-YOUR-KEY" not in example and f"{live_server.url}/v1/chat/completions" in example

    result = subprocess.run(
        ["bash", "-c", example.replace("curl ", "curl -sS ", 1)], capture_output=True, timeout=30, text=True
    )
    assert result.returncode == 0, result.stderr
    assert "simulated model" in result.stdout

    # The request appears in the endpoint's log and chart
    assert EndpointRequest.objects.filter(status_code=200).count() == 1
    page.goto(page.url)
    assert page.locator("#new-key").count() == 0  # shown once
    page.locator("#request-log").get_by_text("/v1/chat/completions").wait_for()
    page.wait_for_selector('#requests-chart[data-points="1"]', state="attached")  # drawn from the chart's data
    screenshot(page, "inference-03-request-charted")
