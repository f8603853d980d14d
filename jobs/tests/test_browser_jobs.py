"""In real headless Chromium, on the embedded default: a user submits a job with the backend left on “auto” from the
Jobs page, sees the quote before submitting, follows the job page while a real sandbox runs ``python train.py``, and
reads its output, its exit code, where it ran and why, and its bill once the machine is released."""

import time

import pytest
from django.urls import reverse
from django.utils import translation

from instances import lifecycle as instance_lifecycle
from jobs import running
from jobs.choices import FINISHED, State
from jobs.models import Job
from tests.fixtures.services import log_in, screenshot

pytestmark = [pytest.mark.browser, pytest.mark.sandbox, pytest.mark.django_db(transaction=True)]

TRAIN = 'printf \'for epoch in range(3): print("epoch", epoch, "训练中")\\n\' > train.py && python3 train.py'


def _beat_until_finished(timeout: float = 90.0) -> Job:
    """What the worker's beats do (the jobs tick and the instances' reconcile) until the one job has ended."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        running.watch_active()
        running.place_queued()
        instance_lifecycle.reconcile()
        job = Job.objects.get()
        if job.state in FINISHED:
            return job
        time.sleep(0.3)
    job = Job.objects.get()
    raise AssertionError(f"the job did not end: {job.state} {job.state_detail}")


def test_a_job_submitted_on_auto_runs_train_py_and_the_page_shows_its_output_and_bill(
    page, live_server, on_local, lifecycle, owner
):
    log_in(page, live_server, owner)
    page.goto(f"{live_server.url}{reverse('jobs:submit')}")
    page.fill("#id_name", "resnet")
    page.fill("#id_command", TRAIN)
    page.locator("#id_command").press("Tab")  # leaving the field, as a user does: the form asks for a new quote
    assert page.locator("#id_backend").input_value() == "auto"
    # The live quote: where it would run, why, and the most it can cost, before anything is submitted.
    page.wait_for_selector("#quote-max, #quote-problem", timeout=10_000)
    assert page.locator("#quote-problem").count() == 0, page.locator("#quote").inner_text()
    assert "¥" in page.locator("#quote-max").inner_text()
    assert page.locator("#quote-reason").inner_text().strip()
    assert not Job.objects.exists()

    page.click("#submit-job")
    page.wait_for_selector("#job-state", timeout=10_000)
    job = Job.objects.get()
    assert page.url.endswith(job.get_absolute_url())
    assert job.family in {"npu", "mlu", "dcu", "cuda"}  # auto chose a chip family, by price per unit of work

    job = _beat_until_finished()
    assert (job.state, job.exit_code) == (State.SUCCEEDED, 0), job.state_detail
    # The page follows the job by itself (it polls while the job is live) to its end.
    page.wait_for_selector('#job-state[data-state="succeeded"]', timeout=15_000)
    log = page.locator("#job-log").inner_text()
    assert "epoch 2 训练中" in log
    assert page.locator("#job-exit").inner_text().strip() == "0"
    with translation.override("zh-hans"):  # the page's language: a first visit is in Chinese
        assert page.locator("#job-reason").inner_text().strip() == job.choice_reason
    page.reload()
    assert "¥" in page.locator("#job-bill").inner_text()
    # A first visit is in Chinese: the page's headings and labels too.
    facts = page.locator("#job-facts th").all_inner_texts() + page.locator("h2").all_inner_texts()
    assert "运行于" in facts and "日志" in facts
    assert not [text for text in facts if text.isascii()], facts
    screenshot(page, "job-succeeded")
