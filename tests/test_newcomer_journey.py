"""The newcomer journey, end to end in headless Chromium on PostgreSQL + Redis with a real Celery worker.

A visitor reads the prices and the chip comparison, signs up, verifies, finds every console section in the phone
menu, sees the ¥10 trial credit, clones a Xinchuang image in one click, launches it on a subsidised Ascend 910B with
an idle shutdown, mounts a dataset, uploads a file, watches the (simulated) metrics, stops (billing stops), tops up
in the sandbox, finds the inference templates and endpoints in the sidebar, deploys a hub model as an inference
endpoint and calls it, releases, and the month's statement adds up to what the ledger charged. Every step leaves a
screenshot ``artifacts/screenshots/journey-NN-*.png``, and no page of the journey may log a Content-Security-Policy
violation.
"""

import re
import subprocess
from decimal import Decimal
from pathlib import Path

import pytest
from django.conf import settings
from django.core import mail
from django.db.models import Sum
from django.utils import timezone

from accounts.models import User, WorkerHeartbeat
from billing import ledger, metering, statements
from billing.choices import SPEND_KINDS
from billing.models import LedgerTransaction, UsageSession
from inference.models import EndpointRequest
from instances.models import Instance
from tests.fixtures.services import screenshot, wait_until

pytestmark = [
    pytest.mark.browser,
    pytest.mark.postgres,
    pytest.mark.redis,
    pytest.mark.django_db(transaction=True),
]

EMAIL, PASSWORD = "newcomer@example.com", "Kunpeng-Ascend-910B"


@pytest.fixture
def quick_backend(monkeypatch):
    for name in ("INSTANCES_SIM_PULL_SECONDS", "INSTANCES_SIM_BOOT_SECONDS", "INSTANCES_STOP_GRACE_SECONDS"):
        monkeypatch.setenv(name, "1")
    queue = Path(settings.DATA_DIR) / "broker" / "queue"
    for message in queue.glob("*") if queue.exists() else []:
        message.unlink(missing_ok=True)


def _money(text: str) -> Decimal:
    return Decimal(re.sub(r"[^\d.\-]", "", text))


def test_a_newcomer_goes_from_the_price_list_to_a_statement_that_adds_up(
    page, live_server, inference_catalog, quick_backend, worker_process, tmp_path
):
    worker_process(name="journey")
    wait_until(lambda: WorkerHeartbeat.objects.exists(), timeout=60, message="the worker to start")
    csp_errors = []
    page.on("console", lambda m: csp_errors.append(m.text) if "Content Security Policy" in m.text else None)
    step = iter(range(1, 100))

    def shot(name):
        screenshot(page, f"journey-{next(step):02d}-{name}")

    # 1. A visitor reads the price list and the chip comparison
    page.goto(f"{live_server.url}/catalog/pricing/")
    assert page.locator("main table").first.is_visible()
    shot("pricing")
    page.goto(f"{live_server.url}/catalog/chips/")
    page.locator("main canvas").first.wait_for()
    shot("chip-comparison")

    # 2. Signs up and verifies the address from the e-mail
    page.goto(f"{live_server.url}/accounts/signup/")
    page.fill("input[name=email]", EMAIL)
    page.fill("input[name=password1]", PASSWORD)
    page.fill("input[name=password2]", PASSWORD)
    page.locator("main form button[type=submit]").click()
    page.wait_for_url("**/accounts/confirm-email/")
    shot("verification-sent")
    link = re.search(r"/accounts/confirm-email/\S+/", mail.outbox[-1].body).group(0)
    page.goto(f"{live_server.url}{link}")
    page.locator("main form button[type=submit]").click()
    page.wait_for_url("**/accounts/login/")
    page.fill("input[name=login]", EMAIL)
    page.fill("input[name=password]", PASSWORD)
    page.locator("main form button[type=submit]").click()
    page.wait_for_url("**/console/")

    # 2b. On a phone the sidebar is hidden; the menu offers every console section
    page.set_viewport_size({"width": 390, "height": 844})
    page.locator(".navbar-toggler").click()
    page.locator("#topnav.collapse.show").wait_for()
    phone_menu = page.locator("#phone-console-nav")
    hrefs = phone_menu.locator("a").evaluate_all("links => links.map(a => a.getAttribute('href'))")
    for path in (
        "/console/",
        "/instances/",
        "/endpoints/",
        "/marketplace/inference/",
        "/marketplace/",
        "/marketplace/hub/",
        "/storage/",
        "/billing/",
    ):
        assert path in hrefs, path
    shot("phone-menu")
    phone_menu.get_by_role("link", name="实例").click()
    page.wait_for_url("**/instances/")
    assert page.locator("main h1").first.inner_text() == "实例"
    page.set_viewport_size({"width": 1280, "height": 900})

    # 3. Sees the ¥10 trial credit
    page.goto(f"{live_server.url}/billing/")
    assert page.locator("#wallet-trial").inner_text() == "¥10.00"
    shot("trial-credit")
    user = User.objects.get(email=EMAIL)

    # 4. One-click clone of a Xinchuang image: the wizard opens on the subsidised Ascend 910B
    page.goto(f"{live_server.url}/marketplace/?category=xinchuang")
    page.locator('[data-image="mindspore-2.3"] a').click()
    page.wait_for_url("**/marketplace/images/mindspore-2.3/")
    shot("xinchuang-image")
    page.click("#clone-button")
    page.wait_for_url("**/instances/new/?*")
    assert page.locator("#id_chip").input_value() == "ascend-910b"
    assert "0.19" in page.locator("#launch-price").inner_text()  # the Xinchuang subsidy line
    page.fill("#id_name", "first-910b")
    page.fill("#id_idle_shutdown_minutes", "30")  # stop by itself after half an hour of idle cards
    shot("wizard-subsidised")

    # 5. Launches, and watches it reach running without reloading; the idle shutdown is on the instance page
    page.click("#launch-button")
    page.wait_for_url("**/instances/*-*/")
    page.wait_for_selector('#instance-badge[data-status="running"]', timeout=30_000)
    instance = Instance.objects.get(owner=user)
    assert instance.idle_shutdown_minutes == 30
    assert "空闲 30 分钟后" in page.locator("#auto-shutdown-idle").inner_text()
    shot("running")

    # 6. Mounts a public dataset read-only
    page.fill("#hub-search-input", "imagenet")
    result = page.locator('#hub-result-list [data-repo="ILSVRC/imagenet-1k"]')
    result.wait_for()
    result.locator(".mount-button").click()
    mounted = page.locator('#mount-list [data-repo="ILSVRC/imagenet-1k"]')
    mounted.wait_for()
    assert "/root/datasets/ILSVRC/imagenet-1k" in mounted.inner_text()
    shot("dataset-mounted")

    # 7. Uploads a file to cloud storage (seen at /root/shared)
    local = tmp_path / "train.jsonl"
    local.write_text('{"prompt": "你好", "answer": "你好！"}\n' * 200, encoding="utf-8")
    page.goto(f"{live_server.url}/storage/")
    page.set_input_files("#storage-file-input", str(local))
    page.locator('#storage-table tr[data-entry="train.jsonl"]').wait_for(timeout=30_000)
    shot("file-uploaded")

    # 8. Watches the metrics (labelled simulated)
    page.goto(f"{live_server.url}{instance.get_absolute_url()}")
    assert page.locator("#metrics-title .badge").is_visible()
    metrics_url = page.locator("#metrics-chart").get_attribute("data-url")
    metrics = page.evaluate(f"fetch('{metrics_url}', {{headers: {{Accept: 'application/json'}}}}).then(r => r.json())")
    assert "card_utilisation" in metrics
    shot("metrics")

    # 9. Stops: billing stops with it
    page.on("dialog", lambda dialog: dialog.accept())
    page.click("#stop-button")
    page.wait_for_selector('#instance-badge[data-status="stopped"]', timeout=30_000)
    session = UsageSession.objects.get(resource_id=instance.public_id)
    assert session.ended_at is not None
    metering.meter(timezone.now())
    charged_at_stop = UsageSession.objects.get(pk=session.pk).charged
    metering.meter(timezone.now() + timezone.timedelta(hours=5))
    assert UsageSession.objects.get(pk=session.pk).charged == charged_at_stop  # nothing while stopped
    shot("stopped")

    # 10. Tops up ¥50 in the labelled sandbox
    page.goto(f"{live_server.url}/billing/")
    page.fill("#id_amount", "50")
    page.locator("#topup-submit").click()
    page.wait_for_url("**/billing/topup/sandbox/**")
    assert page.locator("#sandbox-banner").is_visible()
    shot("sandbox-checkout")
    page.locator("#sandbox-pay").click()
    page.wait_for_url("**/billing/topup/success/**")
    shot("topped-up")

    # 11. Finds the inference templates and endpoints in the sidebar, deploys a hub model as an inference endpoint,
    # calls it with the page's curl example, releases it
    page.locator("nav.sidebar").get_by_role("link", name="推理模板").click()
    page.wait_for_url("**/marketplace/inference/")
    assert page.locator("main h1").first.inner_text() == "推理模板"
    page.locator("nav.sidebar").get_by_role("link", name="推理服务").click()
    page.wait_for_url("**/endpoints/")
    assert page.locator("main h1").first.inner_text() == "推理服务"
    shot("inference-pages")
    page.goto(f"{live_server.url}/marketplace/hub/Qwen/Qwen2.5-0.5B-Instruct")
    page.click('a.deploy-api[data-template="qwen2.5-0.5b-instruct-vllm"]')
    page.wait_for_url("**/endpoints/deploy/qwen2.5-0.5b-instruct-vllm/")
    page.click("#deploy-button")
    page.wait_for_url("**/endpoints/*-*/")
    page.wait_for_selector('#endpoint-badge[data-status="running"]', timeout=30_000)
    page.click("#create-key-button")
    page.wait_for_selector("#new-key")
    example = page.locator("#curl-example").inner_text()
    called = subprocess.run(
        ["bash", "-c", example.replace("curl ", "curl -sS ", 1)], capture_output=True, timeout=30, text=True
    )
    assert called.returncode == 0 and "simulated model" in called.stdout, called.stderr
    assert EndpointRequest.objects.filter(status_code=200).count() == 1
    shot("endpoint-called")
    page.click("#release-button")  # back to the endpoint list, where it shows as releasing
    wait_until(
        lambda: not Instance.objects.filter(kind="endpoint").exclude(status="released").exists(),
        timeout=30,
        message="the endpoint to be released",
    )

    # 12. Releases the instance
    page.goto(f"{live_server.url}{instance.get_absolute_url()}")
    page.click("#release-button")
    page.wait_for_selector('#instance-badge[data-status="released"]', timeout=30_000)
    shot("released")

    # 13. The statement adds up: the page's total is what the ledger charged, and the wallet agrees
    page.goto(f"{live_server.url}/billing/statements/")
    shot("statement")
    spent = -(
        LedgerTransaction.objects.filter(user=user, kind__in=SPEND_KINDS).aggregate(s=Sum("user_amount"))["s"]
        or Decimal("0")
    )
    statement = statements.month_statement(user, timezone.localdate().replace(day=1))
    assert statement.charged == spent
    assert _money(page.locator("#statement-total").inner_text()) == spent
    page.goto(f"{live_server.url}/billing/")
    balance = _money(page.locator("#wallet-balance").inner_text())
    assert balance == Decimal("10.00") + Decimal("50.00") - spent
    assert ledger.check() == []
    assert csp_errors == []
