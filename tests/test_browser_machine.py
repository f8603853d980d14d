"""In real headless Chromium, against the console under uvicorn with a real Celery worker: a new user launches
the quick-start image on the local backend (a real sandbox), opens JupyterLab from the instance page, runs a
notebook cell, runs commands in the terminal (numpy imports there too), sees the terminal's file in JupyterLab's
file browser, opens the web server it started from the instance page's port panel, and finds the real training
run's curve on the instance page.
"""

import math
import os
import re
from decimal import Decimal

import pytest
from django.conf import settings
from django.test import Client
from playwright.sync_api import expect

from accounts.models import WorkerHeartbeat
from billing import wallet
from instances.models import Instance, TrainingScalar
from tests.asgi_server import lab_origin
from tests.fixtures.services import screenshot, wait_until

pytestmark = [pytest.mark.browser, pytest.mark.sandbox, pytest.mark.django_db(transaction=True)]


def _log_in(page, server, user):
    client = Client()
    client.force_login(user)
    cookie = client.cookies[settings.SESSION_COOKIE_NAME]
    page.context.add_cookies([{"name": cookie.key, "value": cookie.value, "url": server.url}])


def test_a_new_user_enters_the_machine_from_the_instance_page(
    page,
    console_server,
    local_console,
    owner,
    worker_process,  # noqa: F811
):
    wallet.adjust_balance(user=owner, amount=Decimal("50"), reason="browser test", staff=None, idempotency_key="bm")
    worker_process(name="machine")
    wait_until(lambda: WorkerHeartbeat.objects.exists(), timeout=60, message="the worker to start")
    _log_in(page, console_server, owner)

    # Launch from the wizard: the quick-start image on one 910B card.
    page.goto(f"{console_server.url}/instances/new/")
    page.select_option("#id_chip", "ascend-910b")
    page.wait_for_selector("#id_image option[value=mindspore-2\\.3-cann8]", state="attached")
    page.wait_for_load_state("networkidle")  # the wizard's live price redraws the form
    page.fill("#id_name", "first-machine")
    expect(page.locator("#id_name")).to_have_value("first-machine")
    expect(page.locator("#price-payable")).to_contain_text("1.71")
    page.click("#launch-button")
    page.wait_for_url("**/instances/*-*/")
    page.wait_for_selector('#instance-badge[data-status="running"]', timeout=60_000)
    instance = Instance.objects.get(name="first-machine")
    expect(page.locator("#sandbox-runtime")).to_be_visible()
    expect(page.locator("#no-machine")).to_have_count(0)
    screenshot(page, "machine-01-running")

    # JupyterLab opens in a new tab, on the instance's own origin beside the console; no token in any URL.
    with page.context.expect_page() as opened:
        page.click("#open-jupyterlab")
    lab = opened.value
    lab.set_default_timeout(60_000)
    lab.wait_for_selector(".jp-Launcher", timeout=90_000)
    assert lab.url.startswith(f"{lab_origin(console_server, instance.public_id)}/instances/{instance.public_id}/lab/")
    assert "token" not in lab.url

    try:
        # A notebook cell runs in the machine's kernel.
        # JupyterLab speaks the console's language (Chinese by default): its launcher's categories are translated.
        lab.locator(
            '.jp-LauncherCard[data-category="Notebook"], .jp-LauncherCard[data-category="笔记本"]'
        ).first.click()
        lab.wait_for_selector(".jp-Notebook .jp-Cell .cm-content")
        idle = lab.locator(".jp-StatusBar-Widget", has_text=re.compile("Idle|空闲")).first
        expect(idle).to_be_visible(timeout=60_000)
        lab.locator(".jp-Notebook .jp-Cell .cm-content").first.click()
        lab.keyboard.type("import numpy; print(numpy.arange(3).sum())")
        lab.keyboard.press("Shift+Enter")
        expect(lab.locator(".jp-OutputArea-output").first).to_have_text("3", timeout=60_000)
        screenshot(lab, "machine-02-notebook")

        # The terminal runs commands (with Chinese text); what it writes shows in the file browser.
        lab.locator('[data-command="launcher:create"]').first.click()
        lab.locator(
            '.jp-LauncherCard[data-category="Other"]:has-text("Terminal"), .jp-LauncherCard:has-text("终端")'
        ).first.click()
        lab.wait_for_selector(".jp-Terminal .xterm-helper-textarea", state="attached")
        lab.locator(".jp-Terminal").last.click()
        lab.keyboard.type(
            "nproc > nproc.txt; python3 -c 'import numpy; print(numpy.__version__)' > numpy.txt; "
            "echo 你好，机器 > 终端.txt; (nohup python3 -m http.server 8123 >/dev/null 2>&1 &)\n"
        )
        home = local_console.home(instance)
        wait_until(
            lambda: (home / "终端.txt").exists() and (home / "nproc.txt").exists(),
            timeout=30,
            message="the terminal's files",
        )
        assert (home / "终端.txt").read_text(encoding="utf-8") == "你好，机器\n"
        # nproc counts the machine's CPUs (its limit), not the host's.
        machine_cpus = min(len(os.sched_getaffinity(0)), math.ceil(settings.LOCAL_CPUS))
        assert int((home / "nproc.txt").read_text()) == machine_cpus
        # The terminal's python3 is the runtime's, with numpy, as the notebook's is.
        wait_until(
            lambda: (home / "numpy.txt").exists() and (home / "numpy.txt").read_text().strip(),
            timeout=30,
            message="numpy imported in the terminal",
        )
        assert re.fullmatch(r"\d+\.\d+.*", (home / "numpy.txt").read_text().strip())
        lab.locator('[data-command="filebrowser:refresh"]').first.click()
        expect(lab.locator(".jp-DirListing-item", has_text="终端.txt")).to_be_visible(timeout=30_000)
        screenshot(lab, "machine-03-terminal")
    except Exception:
        screenshot(lab, "machine-lab-failure")
        raise
    lab.close()

    expect(page.locator("#terminal-hint")).to_be_visible()

    # The port panel finds the web server the terminal started and opens it through the console.
    port = page.locator('#port-list a[data-port="8123"]')
    expect(port).to_be_visible(timeout=30_000)
    with page.context.expect_page() as opened:
        port.click()
    app = opened.value
    expect(app.locator("body")).to_contain_text("终端.txt", timeout=60_000)  # http.server lists the home
    screenshot(app, "machine-04-port")
    app.close()
    # The chart is the machine's own CPU and memory: it has no card to measure.
    expect(page.locator("#metrics-title")).to_contain_text("CPU")

    # Back on the instance page: the curve is the real run's, forwarded by the agent; no "simulated" label.
    wait_until(
        lambda: TrainingScalar.objects.filter(instance=instance, tag="loss").count() >= 3,
        timeout=60,
        message="the quick-start run's scalars",
    )
    page.reload()
    expect(page.locator("#training-chart")).to_have_attribute("data-points", re.compile(r"^[1-9]\d*$"))
    expect(page.locator("#training-title .badge")).to_have_count(0)
    screenshot(page, "machine-05-curve")
