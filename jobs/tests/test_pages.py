"""The jobs pages as a person sees them: the list with its filter and queue places, the submit form and its live
quote, a job's page with where it runs and why, its exit code and bill; someone else's job is a 404."""

from decimal import Decimal
from decimal import Decimal as D

from django.db.models import F

from catalog.models import Node
from jobs.exits import report_exit
from jobs.models import Job

from .conftest import drive
from .helpers import fresh


def test_the_menu_offers_jobs_next_to_instances(english, lifecycle):
    page = english.get("/jobs/").content.decode()
    assert page.index('href="/instances/"') < page.index('href="/jobs/"') < page.index('href="/endpoints/"')


def test_the_list_shows_queue_places_and_filters_by_state(english, submit, lifecycle):
    Node.objects.filter(chip__slug="dcu-z100").update(cards_reserved=F("cards"))
    submit(backend="dcu", name="waiting")
    page = english.get("/jobs/").content.decode()
    assert "waiting" in page and "place 1 in the queue" in page
    assert "waiting" not in english.get("/jobs/?state=running").content.decode()


def test_the_list_query_count_does_not_grow_with_jobs(english, submit, lifecycle, django_assert_max_num_queries):
    submit(backend="dcu")
    with django_assert_max_num_queries(30) as one:
        english.get("/jobs/")
    for i in range(5):
        submit(backend="dcu", name=f"more-{i}")
    with django_assert_max_num_queries(len(one.captured_queries)):
        english.get("/jobs/")


def test_the_submit_form_quotes_the_most_a_job_can_cost(english, lifecycle):
    query = {
        "name": "t",
        "image": "pytorch-2.2-cuda12",
        "backend": "auto",
        "cards": "1",
        "command": "python train.py",
        "timeout": "2",
        "timeout_unit": "3600",
        "max_price_per_hour": "3.00",
        "retries": "0",
    }
    page = english.get("/jobs/new/", query, HTTP_HX_REQUEST="true").content.decode()
    assert "DCU Z100: ¥1.44/h" in page and "your ceiling × the timeout" in page and "¥6.00" in page
    without = english.get("/jobs/new/", {**query, "max_price_per_hour": ""}, HTTP_HX_REQUEST="true")
    assert "¥2.88" in without.content.decode()  # ¥1.44 an hour for two hours

    response = english.post("/jobs/new/", query)
    job = Job.objects.get()
    assert response.status_code == 302 and response["Location"] == job.get_absolute_url()
    assert job.timeout_seconds == 7200 and job.max_price_per_hour == Decimal("3.00")


def test_a_jobs_page_shows_where_it_ran_why_its_exit_code_and_bill(english, submit, lifecycle):
    job = submit(backend="auto")
    drive()
    report_exit(fresh(job).instance, 0)
    drive()
    page = english.get(job.get_absolute_url()).content.decode()
    assert "Succeeded" in page and "DCU Z100 × 1" in page and "cheapest of 3 families" in page
    assert '<td id="job-exit">0</td>' in page
    instance = fresh(job).instance
    assert instance.get_absolute_url() in page
    # One started minute at ¥1.44 an hour: the page's bill is what the ledger charged, to the fen.
    (session,) = lifecycle.sessions_of(instance)
    assert session.charged == Decimal("0.02") and 'id="job-bill">¥0.02<' in page


def test_cancel_from_the_page(english, submit, lifecycle):
    job = submit(backend="dcu")
    drive()
    assert english.post(f"/jobs/{job.public_id}/cancel/").status_code == 302
    assert fresh(job).state == "cancelled"


def test_someone_elses_job_page_is_a_404(client, stranger, submit):
    job = submit(backend="dcu")
    client.force_login(stranger)
    assert client.get(job.get_absolute_url()).status_code == 404
    assert client.post(f"/jobs/{job.public_id}/cancel/").status_code == 404
    assert "train" not in client.get("/jobs/").content.decode()


def test_the_job_page_speaks_chinese(client, owner, submit, lifecycle):

    job = submit(backend="auto", max_price_per_hour=D("3.00"))
    client.force_login(owner)
    client.cookies["django_language"] = "zh-hans"
    page = client.get(job.get_absolute_url()).content.decode()
    assert "排队中" in page and "在您 ¥3.00/小时的价格上限内的 2 个芯片系列中最便宜" in page
    assert "任务" in client.get("/jobs/").content.decode()
