"""In real headless Chromium, with a real Celery worker process: a visitor browses the Xinchuang category of the
image marketplace, signs up (verifying by e-mail), comes back to the MindSpore image, clicks "one-click clone",
finds the launch wizard prefilled with a 910B spec and the subsidised price, launches — two clicks after sign-up —
and watches the instance reach running."""

import re
from pathlib import Path

import pytest
from django.conf import settings
from django.core import mail

from accounts.models import WorkerHeartbeat
from instances.models import Instance
from tests.fixtures.services import screenshot, wait_until

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PASSWORD = "Kunpeng-Ascend-910B"


@pytest.fixture
def quick_backend(monkeypatch):
    for name in ("PULL", "BOOT"):
        monkeypatch.setenv(f"INSTANCES_SIM_{name}_SECONDS", "1")
    monkeypatch.setenv("INSTANCES_STOP_GRACE_SECONDS", "1")
    queue = Path(settings.DATA_DIR) / "broker" / "queue"
    for message in queue.glob("*") if queue.exists() else []:
        message.unlink(missing_ok=True)


def _sign_up(page, live_server, email):
    page.goto(f"{live_server.url}/accounts/signup/")
    page.fill("input[name=email]", email)
    page.fill("input[name=password1]", PASSWORD)
    page.fill("input[name=password2]", PASSWORD)
    page.locator("main form button[type=submit]").click()
    page.wait_for_url("**/accounts/confirm-email/")
    link = re.search(r"/accounts/confirm-email/\S+/", mail.outbox[-1].body).group(0)
    page.goto(f"{live_server.url}{link}")
    page.locator("main form button[type=submit]").click()
    page.wait_for_url("**/accounts/login/")
    page.fill("input[name=login]", email)
    page.fill("input[name=password]", PASSWORD)
    page.locator("main form button[type=submit]").click()
    page.wait_for_url("**/console/")


def test_from_the_marketplace_to_a_running_instance_in_two_clicks(
    page, live_server, catalog, quick_backend, worker_process
):
    worker_process(name="browser")
    wait_until(lambda: WorkerHeartbeat.objects.exists(), timeout=60, message="the worker to start")

    # A visitor browses the Xinchuang category and opens the MindSpore image
    page.goto(f"{live_server.url}/marketplace/")
    page.click("#category-xinchuang")
    page.wait_for_url("**/marketplace/?category=xinchuang")
    assert page.locator('[data-image="vllm-0.6"]').count() == 0
    page.locator('[data-image="mindspore-2.3"] a').click()
    page.wait_for_url("**/marketplace/images/mindspore-2.3/")
    assert "1.71" in page.locator('#image-chips [data-family="npu"] .image-price').inner_text()
    image_url = page.url
    screenshot(page, "marketplace-01-image")

    # Signs up, verifies by e-mail (the ¥10 trial credit), logs in
    _sign_up(page, live_server, "visitor@example.com")
    assert len(mail.outbox) == 1

    # Back on the image: click 1, one-click clone → the wizard, prefilled with a 910B spec and the subsidised price
    page.goto(image_url)
    page.click("#clone-button")
    page.wait_for_url("**/instances/new/?*")
    assert page.locator("#id_chip").input_value() == "ascend-910b"
    assert page.locator("#id_cards").input_value() == "1"
    assert page.locator("#id_image").input_value() == "mindspore-2.3-cann8"
    assert "1.71" in page.locator("#price-payable").inner_text()  # ¥1.90 less the 10% Xinchuang subsidy
    assert "0.19" in page.locator("#launch-price").inner_text()  # the subsidy line
    screenshot(page, "marketplace-02-wizard-prefilled")

    # Click 2: launch, and watch it reach running without reloading
    page.click("#launch-button")
    page.wait_for_url("**/instances/*-*/")
    page.wait_for_selector('#instance-badge[data-status="running"]', timeout=30_000)
    screenshot(page, "marketplace-03-running")
    instance = Instance.objects.get(owner__email="visitor@example.com")
    assert instance.image == "mindspore-2.3-cann8" and instance.chip.slug == "ascend-910b"
    assert instance.status == "running"
