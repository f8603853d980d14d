"""In real headless Chromium: the instance page's logs panel follows a Slurm job's output file as it grows, stays
scrolled to the end (unless the reader scrolled up), survives the status polls, shows Chinese, and stops following
when the instance stops."""

import time

import pytest

from instances.backends.slurm import SlurmBackend, log_name
from instances.models import Instance
from instances.tests.fixtures import settle
from tests.fixtures.services import log_in, screenshot, wait_until

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _append(path, text: str) -> None:
    with path.open("ab") as file:
        file.write(text.encode())


def _at_end(page) -> bool:
    return page.evaluate(
        "(pre => pre.scrollHeight - pre.scrollTop - pre.clientHeight < 24)(document.querySelector('#logs-text'))"
    )


def _shows(page, text: str):
    return lambda: text in page.locator("#logs-text").inner_text()


def test_the_logs_panel_follows_the_job_output(page, live_server, owner, launch, settings, tmp_path):
    settings.SLURM = {**settings.SLURM, "root": str(tmp_path)}
    instance = launch(start_command="python train.py", env={"EPOCHS": "3"})
    settle()
    Instance.objects.filter(pk=instance.pk).update(backend_name="slurm", backend_job_id="7")
    backend = SlurmBackend()
    folder = backend.log_folder(backend.config(instance))
    folder.mkdir(parents=True)
    log = folder / log_name(instance.public_id, "7")
    _append(log, "开始训练：中文输出\n" + "".join(f"step {n}\n" for n in range(1, 80)))
    log_in(page, live_server, owner)

    page.goto(f"{live_server.url}{instance.get_absolute_url()}")
    text = page.locator("#logs-text")
    assert "开始训练：中文输出" in text.inner_text()
    wait_until(lambda: _at_end(page), timeout=5, message="the tail scrolled to its end")
    page.evaluate("document.querySelector('#instance-logs').dataset.original = 'yes'")

    # The job writes more: the panel shows it within a poll or two and keeps to the end.
    _append(log, "step 80 损失 0.73\n")
    wait_until(_shows(page, "step 80 损失 0.73"), timeout=10, message="the new line")
    wait_until(lambda: _at_end(page), timeout=5, message="the tail scrolled to its end")

    # A reader who scrolled up keeps their place while lines arrive.
    page.evaluate("document.querySelector('#logs-text').scrollTop = 0")
    time.sleep(0.1)  # a swap settling at that very moment may still scroll it once; a reader would scroll again
    page.evaluate("document.querySelector('#logs-text').scrollTop = 0")
    _append(log, "step 81\n")
    wait_until(_shows(page, "step 81"), timeout=10, message="the next line")
    assert page.evaluate("document.querySelector('#logs-text').scrollTop") == 0

    # The status polls (every 2 s) kept the same panel: the page never re-read it from scratch.
    time.sleep(2.5)
    assert page.evaluate("document.querySelector('#instance-logs').dataset.original") == "yes"
    screenshot(page, "instance-logs-following")

    # Stopped: the status poll brings a fresh panel, which no longer polls.
    Instance.objects.filter(pk=instance.pk).update(status="stopped", wanted="stopped")
    page.wait_for_selector('#instance-badge[data-status="stopped"]', timeout=15_000)
    wait_until(lambda: not page.evaluate("document.querySelector('#instance-logs').dataset.original"), timeout=10)
    assert page.locator("#instance-logs-output").get_attribute("hx-trigger") is None
    assert "step 81" in page.locator("#logs-text").inner_text()
