"""In real headless Chromium, with a real Celery worker process on the embedded broker: launch an instance from
the wizard, watch it reach running without reloading, stop it, start it again, release it.

The simulated backend's timings are set to one second (pull, boot, grace) through the environment, which the
worker process inherits. Tasks are executed by the real worker (``worker_process``), not eagerly.
"""

import math
import re
from decimal import Decimal
from pathlib import Path

import pytest
from django.conf import settings
from playwright.sync_api import expect

from accounts.models import WorkerHeartbeat
from billing import wallet
from billing.models import UsageSession
from instances.models import Instance
from tests.fixtures.services import log_in, screenshot, wait_until

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def quick_backend(monkeypatch):
    for name in ("PULL", "BOOT"):
        monkeypatch.setenv(f"INSTANCES_SIM_{name}_SECONDS", "1")
    monkeypatch.setenv("INSTANCES_SIM_STEP_SECONDS", "0.2")  # the quick-start curve: a step every 0.2 s
    monkeypatch.setenv("INSTANCES_STOP_GRACE_SECONDS", "1")
    queue = Path(settings.DATA_DIR) / "broker" / "queue"
    for message in queue.glob("*") if queue.exists() else []:
        message.unlink(missing_ok=True)


def _badge(page, status, timeout=30_000):
    page.wait_for_selector(f'#instance-badge[data-status="{status}"]', timeout=timeout)


def test_launch_watch_it_run_stop_start_and_release(page, live_server, owner, catalog, quick_backend, worker_process):
    wallet.adjust_balance(user=owner, amount=Decimal("100"), reason="browser test", staff=None, idempotency_key="bt")
    worker_process(name="browser")
    wait_until(lambda: WorkerHeartbeat.objects.exists(), timeout=60, message="the worker to start")
    log_in(page, live_server, owner)
    page.on("dialog", lambda dialog: dialog.accept())

    # The wizard: pick a chip, see the price change live, name it, launch
    page.goto(f"{live_server.url}/instances/new/")
    page.select_option("#id_chip", "mlu370-x8")
    page.wait_for_selector("#id_image option[value=pytorch-2\\.2-neuware]", state="attached")
    page.select_option("#id_cards", "2")
    expect(page.locator("#price-payable")).to_contain_text("3.06")  # no string predicates: CSP forbids eval
    page.fill("#id_name", "browser-mlu")
    screenshot(page, "instances-01-wizard")
    page.click("#launch-button")
    page.wait_for_url("**/instances/*-*/")

    # Running without reloading: the status partial polls until the instance settles
    _badge(page, "running")
    # The console is in Chinese by default: the access details carry the “模拟” (simulated) label.
    assert page.locator("#access").get_by_text("模拟").first.is_visible()
    screenshot(page, "instances-02-running")

    page.click("#stop-button")
    _badge(page, "stopped")
    assert page.locator("#release-countdown").is_visible()
    # The run's training curve (the simulated quick-start script), drawn by Chart.js from the page's JSON
    page.reload()
    expect(page.locator("#training-chart")).to_have_attribute("data-points", re.compile(r"^[1-9]\d*$"))
    expect(page.locator("#training-empty")).to_be_hidden()
    screenshot(page, "instances-03-stopped")

    page.click("#start-button")
    _badge(page, "running")

    page.click("#release-button")
    _badge(page, "released")
    screenshot(page, "instances-04-released")

    instance = Instance.objects.get(name="browser-mlu")
    moves = [(e.old, e.new) for e in instance.events.order_by("at", "id") if e.old != e.new]
    assert moves == [
        ("", "creating"),
        ("creating", "starting"),
        ("starting", "running"),
        ("running", "stopping"),
        ("stopping", "stopped"),
        ("stopped", "starting"),
        ("starting", "running"),
        ("running", "releasing"),
        ("releasing", "released"),
    ]
    assert instance.reserved_cards == 0

    # The list shows it gone from the live list
    page.goto(f"{live_server.url}/instances/")
    assert page.locator("[data-instance]").count() == 0

    # Billing: one usage session per running period, each ended when the stop (or release) was asked and charged
    # per started minute — nothing for creating, starting or the stopped time in between
    running = [e.at for e in instance.events.filter(new="running").order_by("at")]
    asked = [e.at for e in instance.events.filter(old="running").order_by("at")]
    sessions = list(UsageSession.objects.filter(resource_id=instance.public_id).order_by("started_at"))
    assert [(s.started_at, s.ended_at) for s in sessions] == list(zip(running, asked, strict=True))
    for session in sessions:
        assert session.charged_minutes == math.ceil((session.ended_at - session.started_at).total_seconds() / 60)
    page.goto(f"{live_server.url}/billing/")
    screenshot(page, "instances-05-wallet")
