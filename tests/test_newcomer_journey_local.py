"""The newcomer journey on the embedded default's local backend: real bubblewrap machines, in headless Chromium on
PostgreSQL + Redis with a real Celery worker and the console under uvicorn.

A visitor signs up, verifies, sees the ¥10 trial credit, launches the CPU-only machine the trial pays for and sees
it running, adds an SSH key on the page, copies a file into the machine and back with the system ``scp`` through
the console's SSH gateway (the command the instance page shows), finds it in JupyterLab opened from the page,
deploys the CPU demo inference template and calls it with the ``openai`` client (an answer, streamed and not) and
with ``curl``, releases everything, and the month's statement and the wallet show what the ledger charged. It runs
on a 390 px phone, in Chinese and in English: no console page of the journey scrolls sideways, none shows an English
label or a slug in Chinese, and none logs a Content-Security-Policy violation. Every step leaves a screenshot
``artifacts/screenshots/journey-local-<language>-NN-*.png``. (tests/test_newcomer_journey.py walks the wider journey
on the simulated backend.)
"""

import json
import os
import re
import subprocess
from decimal import Decimal

import openai
import pytest
from django.conf import settings as django_settings
from django.core import mail
from django.db.models import Sum
from django.utils import timezone
from playwright.sync_api import expect

from accounts.models import User, WorkerHeartbeat
from billing import ledger, metering, statements
from billing.choices import SPEND_KINDS
from billing.models import LedgerTransaction
from inference.models import Endpoint, InferenceTemplate
from instances.models import Instance
from instances.tests.ssh_fixtures import make_key, scp
from tests.fixtures.services import screenshot, wait_until

pytestmark = [
    pytest.mark.browser,
    pytest.mark.postgres,
    pytest.mark.redis,
    pytest.mark.sandbox,
    pytest.mark.django_db(transaction=True),
]

EMAIL, PASSWORD = "newcomer@example.com", "Kunpeng-Ascend-910B"
TRIAL = Decimal("10.00")
MACHINE = "first-cpu"
# A machine starts in seconds on the local backend; JupyterLab's first load and the model server take longer.
RUNNING_MS = 60_000
PHONE = {"width": 390, "height": 844}
# The labels of a page (headings, table heads, form labels, buttons, badges, the menus): in Chinese, none may be an
# English word or a slug. Names are not labels: the products, tools and terms Chinese pages spell as they are (Token
# among them, as Chinese model services write it), and what the newcomer typed or the page gave them to copy.
LABELS = "main :is(h1, h2, h3, h4, h5, th, label, button, .badge, dt, .nav-link), nav :is(a, button)"
NAMES = set(
    "JupyterLab Jupyter SSH API CPU GPU URL Python PyTorch Ubuntu Linux OpenAI"
    " Ascend CANN vLLM MindFormers Token GB MB GiB MiB".split()
)


@pytest.fixture(params=["zh-hans", "en"])
def phone(request, browser, console_server):
    """A phone's browser (390 px) in the journey's language: the language cookie is set before the first page."""
    context = browser.new_context(
        viewport=PHONE, is_mobile=True, locale="zh-CN" if request.param == "zh-hans" else "en-US"
    )
    context.add_cookies(
        [{"name": django_settings.LANGUAGE_COOKIE_NAME, "value": request.param, "url": console_server.url}]
    )
    page = context.new_page()
    page.set_default_timeout(15_000)
    page.language = request.param
    yield page
    report = getattr(request.node, "rep_call", None)
    if report is not None and report.failed:
        screenshot(page, f"journey-local-{request.param}-failure")
    context.close()


def _fits_and_speaks(page, typed=()):
    """The page never scrolls sideways on the phone; in Chinese, its labels hold no English word and no slug."""
    width = page.evaluate("Math.max(document.documentElement.scrollWidth, document.body.scrollWidth)")
    assert width <= PHONE["width"], (page.url, width)
    if page.language != "zh-hans":
        return
    labels = page.locator(LABELS).evaluate_all("els => els.filter(e => e.offsetParent !== null).map(e => e.innerText)")
    words = {w for label in labels for w in re.findall(r"[A-Za-z][A-Za-z0-9_.-]*[A-Za-z0-9]", label)}
    foreign = sorted(words - NAMES - {w for text in typed for w in re.findall(r"[A-Za-z0-9_.-]+", text)})
    assert not foreign, (page.url, foreign)


def _money(text: str) -> Decimal:
    return Decimal(re.sub(r"[^\d.\-]", "", text))


def _sign_up(page, url):
    page.goto(f"{url}/accounts/signup/")
    page.fill("input[name=email]", EMAIL)
    page.fill("input[name=password1]", PASSWORD)
    page.fill("input[name=password2]", PASSWORD)
    page.locator("main form button[type=submit]").click()
    page.wait_for_url("**/accounts/confirm-email/")
    link = re.search(r"/accounts/confirm-email/\S+/", mail.outbox[-1].body).group(0)
    page.goto(f"{url}{link}")
    page.locator("main form button[type=submit]").click()
    page.wait_for_url("**/accounts/login/")
    page.fill("input[name=login]", EMAIL)
    page.fill("input[name=password]", PASSWORD)
    page.locator("main form button[type=submit]").click()
    page.wait_for_url("**/console/")


def test_a_newcomer_runs_a_real_machine_copies_files_with_scp_calls_an_endpoint_and_the_statement_adds_up(
    phone, settings, console_server, local_console, inference_catalog, worker_process, gateway, sftp_server, tmp_path
):
    page = phone
    url = console_server.url
    settings.SSH_GATEWAY_PORT = gateway.port  # the port the instance page tells users to connect to
    worker_process(name="journey-local")
    wait_until(lambda: WorkerHeartbeat.objects.exists(), timeout=60, message="the worker to start")
    csp_errors = []
    page.on("console", lambda m: csp_errors.append(m.text) if "Content Security Policy" in m.text else None)
    page.on("dialog", lambda dialog: dialog.accept())  # "Stop this instance?", "Release this endpoint?"…
    step = iter(range(1, 100))

    def shot(name, on=page):
        screenshot(on, f"journey-local-{page.language}-{next(step):02d}-{name}")
        if on is page:
            _fits_and_speaks(page, typed=(EMAIL, MACHINE, "id_ed25519@laptop", *names))

    names = []  # what the console named for the newcomer: the endpoint's machine, its model

    # 1. Signs up, verifies the address from the e-mail, and sees the ¥10 trial credit
    _sign_up(page, url)
    page.goto(f"{url}/billing/")
    expect(page.locator("#wallet-trial")).to_have_text("¥10.00")
    shot("trial-credit")
    user = User.objects.get(email=EMAIL)

    # 2. Launches a CPU-only machine (what the trial pays for: ¥0.10 an hour) and sees it running
    page.goto(f"{url}/instances/new/")
    page.check("#id_no_card")
    expect(page.locator("#price-payable")).to_contain_text("0.10")
    page.wait_for_load_state("networkidle")  # the wizard's live price redraws the form
    page.fill("#id_name", MACHINE)
    expect(page.locator("#id_name")).to_have_value(MACHINE)
    shot("wizard-cpu-only")
    page.click("#launch-button")
    page.wait_for_url("**/instances/*-*/")
    expect(page.locator("#instance-badge")).to_have_attribute("data-status", "running", timeout=RUNNING_MS)
    expect(page.locator("#sandbox-runtime")).to_be_visible()
    instance = Instance.objects.get(owner=user, name=MACHINE)
    assert instance.cards == 0 and instance.backend_name == "local"
    shot("running")

    # 3. The page says an SSH key is needed; adds one there, then copies a file in and back with the system scp
    expect(page.locator("#ssh-no-keys")).to_be_visible()
    page.locator("#ssh-no-keys a").click()
    page.wait_for_url("**/console/ssh-keys/")
    key = make_key(tmp_path / "laptop", "id_ed25519")
    page.fill("#id_public_key", key.public_text)
    page.locator("#ssh-key-form button[type=submit]").click()
    expect(page.locator("#ssh-key-added")).to_be_visible()
    expect(page.locator("#ssh-key-table")).to_contain_text("id_ed25519@laptop")
    shot("ssh-key-added")
    page.goto(f"{url}{instance.get_absolute_url()}")
    command = page.locator("#ssh-command").input_value()
    found = re.fullmatch(r"ssh -p (\d+) (\S+)@(\S+)", command)
    assert found, command
    port, login, host = int(found[1]), found[2], found[3]
    assert port == gateway.port and login == str(instance.public_id)
    data = tmp_path / "weights.bin"
    data.write_bytes(os.urandom(300_000) + "你好，机器\n".encode())
    sent = scp(port, key, str(data), f"{login}@{host}:")
    assert sent.returncode == 0, sent.stderr.decode()
    back = tmp_path / "back" / "weights.bin"
    back.parent.mkdir()
    got = scp(port, key, f"{login}@{host}:weights.bin", str(back))
    assert got.returncode == 0, got.stderr.decode()
    assert back.read_bytes() == data.read_bytes()
    shot("ssh-command")

    # 4. Opens JupyterLab from the page: it loads, and the file scp copied is in the home's file browser
    with page.context.expect_page() as opened:
        page.click("#open-jupyterlab")
    lab = opened.value
    expect(lab.locator(".jp-Launcher")).to_be_visible(timeout=90_000)
    expect(lab.locator(".jp-DirListing-item", has_text="weights.bin")).to_be_visible(timeout=30_000)
    assert "token" not in lab.url
    shot("jupyterlab", on=lab)
    lab.close()

    # 5. Deploys the CPU demo inference template and calls it with the openai client, streamed and not
    page.goto(f"{url}/marketplace/inference/")
    page.locator('tr[data-template="tiny-demo-cpu"] td a').first.click()
    page.wait_for_url("**/marketplace/inference/tiny-demo-cpu/")
    expect(page.locator("#needs-a-card")).to_have_count(0)
    names.append(InferenceTemplate.objects.get(slug="tiny-demo-cpu").model.repo)  # the model's name, its heading
    shot("cpu-template")
    page.click("#deploy-cta")
    page.wait_for_url("**/endpoints/deploy/tiny-demo-cpu/")
    page.click("#deploy-button")
    page.wait_for_url("**/endpoints/*-*/")
    expect(page.locator("#endpoint-badge")).to_have_attribute("data-status", "running", timeout=RUNNING_MS)
    expect(page.locator("#simulated-label")).to_have_count(0)  # a real model answers
    page.click("#create-key-button")
    api_key = page.locator("#new-key").inner_text().strip()
    base_url = page.locator("#base-url").inner_text().strip()
    endpoint = Endpoint.objects.get(instance__owner=user)
    names += [endpoint.instance.name, endpoint.served_model]
    client = openai.OpenAI(base_url=base_url, api_key=api_key, max_retries=0, timeout=30)
    messages = [{"role": "user", "content": "您好，请介绍一下这台机器"}]
    answer = client.chat.completions.create(model=endpoint.served_model, messages=messages, max_tokens=20)
    text = answer.choices[0].message.content
    assert text and answer.usage.completion_tokens > 0, answer
    stream = client.chat.completions.create(model=endpoint.served_model, messages=messages, max_tokens=12, stream=True)
    streamed = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
    assert streamed
    # And with curl, as the page's example does
    request = json.dumps({"model": endpoint.served_model, "messages": messages, "max_tokens": 8})
    headers = ["-H", f"Authorization: Bearer {api_key}", "-H", "Content-Type: application/json"]
    curl = subprocess.run(
        ["curl", "-sS", "--fail-with-body", f"{base_url}/chat/completions", *headers, "-d", request],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert curl.returncode == 0, curl.stderr + curl.stdout
    assert json.loads(curl.stdout)["choices"][0]["message"]["content"]
    page.reload()  # the three calls in the endpoint's request log
    expect(page.locator("#request-log tbody tr")).to_have_count(3)
    expect(page.locator("#request-log")).to_contain_text("/v1/chat/completions")
    shot("endpoint-called")

    # 6. Releases the endpoint, stops and releases the machine
    page.click("#release-button")
    wait_until(
        lambda: Instance.objects.get(pk=endpoint.instance_id).status == "released",
        timeout=60,
        message="the endpoint to be released",
    )
    page.goto(f"{url}{instance.get_absolute_url()}")
    page.click("#stop-button")
    expect(page.locator("#instance-badge")).to_have_attribute("data-status", "stopped", timeout=RUNNING_MS)
    shot("stopped")
    page.click("#release-button")
    expect(page.locator("#instance-badge")).to_have_attribute("data-status", "released", timeout=RUNNING_MS)
    shot("released")

    # 7. The statement lists the machine and the endpoint with their billed minutes; its total is what the ledger
    # charged, and the wallet's balance is the trial credit less it
    metering.meter(timezone.now())  # the billing beat's next tick posts the last minutes
    spent = -(
        LedgerTransaction.objects.filter(user=user, kind__in=SPEND_KINDS).aggregate(s=Sum("user_amount"))["s"]
        or Decimal("0")
    )
    page.goto(f"{url}/billing/statements/")
    shot("statement")
    lines = page.locator("#statement tbody tr")
    expect(lines).to_have_count(2)
    for name in (MACHINE, endpoint.instance.name):
        line = lines.filter(has_text=name)
        expect(line).to_have_count(1)
        assert int(line.locator("td").nth(3).inner_text()) >= 1, name  # billed minutes
    statement = statements.month_statement(user, timezone.localdate().replace(day=1))
    assert statement.charged == spent
    assert _money(page.locator("#statement-total").inner_text()) == spent
    page.goto(f"{url}/billing/")
    assert _money(page.locator("#wallet-balance").inner_text()) == TRIAL - spent
    shot("wallet")
    assert ledger.check() == []
    assert csp_errors == []
