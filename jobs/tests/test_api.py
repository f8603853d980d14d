"""The jobs API as a client uses it: submit, list by state, detail, logs, cancel, rerun — and nobody else's."""

import pytest

from jobs.exits import report_exit
from jobs.models import Job

from .conftest import drive
from .helpers import fresh

BODY = {
    "name": "resnet",
    "image": "pytorch-2.2-cuda12",
    "command": "python train.py",
    "backend": "auto",
    "cards": 1,
    "timeout_seconds": 3600,
    "max_price_per_hour": "3.00",
}


@pytest.fixture
def job(owner_api, lifecycle):
    response = owner_api.post("/api/v1/jobs/", BODY, format="json")
    assert response.status_code == 201, response.json()
    return Job.objects.get(public_id=response.json()["id"])


def test_a_submitted_job_says_where_it_runs_and_why(owner_api, job):
    body = owner_api.get(f"/api/v1/jobs/{job.public_id}").json()
    assert body["state"] == "queued" and body["queue_position"] == 1
    assert body["family"] == "dcu" and body["chip"] == "dcu-z100"
    assert "2 个芯片系列中最便宜" in body["choice_reason"]  # the API speaks Chinese by default


def test_the_list_filters_by_state(owner_api, job):
    drive()
    assert [j["id"] for j in owner_api.get("/api/v1/jobs/?state=running").json()["results"]] == [str(job.public_id)]
    assert owner_api.get("/api/v1/jobs/?state=queued").json()["results"] == []
    assert owner_api.get("/api/v1/jobs/?state=nonsense").status_code == 400


def test_cancel_and_rerun(owner_api, job):
    drive()
    cancelled = owner_api.post(f"/api/v1/jobs/{job.public_id}/cancel")
    assert cancelled.status_code == 202 and cancelled.json()["state"] == "cancelled"
    assert owner_api.post(f"/api/v1/jobs/{job.public_id}/cancel").status_code == 409
    again = owner_api.post(f"/api/v1/jobs/{job.public_id}/rerun")
    assert again.status_code == 201 and again.json()["id"] != str(job.public_id)


def test_logs_of_a_job_on_the_simulated_backend_say_so(owner_api, job):
    drive()
    body = owner_api.get(f"/api/v1/jobs/{job.public_id}/logs").json()
    assert body == {"lines": [], "simulated": True, "live": True}
    report_exit(fresh(job).instance, 0)
    drive()
    assert owner_api.get(f"/api/v1/jobs/{job.public_id}/logs").json()["live"] is False


def test_bad_input_names_the_field(owner_api, lifecycle):
    response = owner_api.post("/api/v1/jobs/", {**BODY, "max_price_per_hour": "0.50"}, format="json")
    assert response.status_code == 400 and "max_price_per_hour" in response.json()["errors"]


@pytest.mark.parametrize(("method", "suffix"), [("get", ""), ("get", "/logs"), ("post", "/cancel"), ("post", "/rerun")])
def test_someone_elses_job_is_a_404(stranger_api, anon_api, job, method, suffix):
    url = f"/api/v1/jobs/{job.public_id}{suffix}"
    assert getattr(stranger_api, method)(url).status_code == 404
    assert getattr(anon_api, method)(url).status_code in (401, 403)
    assert stranger_api.get("/api/v1/jobs/").json()["results"] == []
