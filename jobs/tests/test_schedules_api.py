"""The job schedules API as a client uses it: create, list, runs, suspend, resume, delete — a team's read-only
member changes none, and nobody else sees them."""

from datetime import UTC, datetime

import pytest
import time_machine
from rest_framework.test import APIClient

from accounts import services as accounts
from jobs import schedules
from jobs.models import Job, JobSchedule
from teams import services as teams
from teams.models import Membership
from teams.roles import Role
from tests.fixtures.factories import UserFactory

SCHEDULES = "/api/v1/jobs/schedules/"
BODY = {
    "name": "nightly",
    "image": "pytorch-2.2-cuda12",
    "command": "python train.py",
    "backend": "dcu",
    "timeout_seconds": 3600,
    "cron": "0 2 * * *",
}
# 2026-03-02 01:00 in Shanghai.
BEFORE_2AM = datetime(2026, 3, 1, 17, 0, tzinfo=UTC)


def _api(user, team=None):
    client = APIClient()
    token = accounts.create_api_token(user, name="t", scope="read_write", team=team).plaintext
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}", HTTP_ACCEPT_LANGUAGE="en")
    return client


@pytest.fixture
def created(owner_api, lifecycle):
    with time_machine.travel(BEFORE_2AM, tick=False):
        response = owner_api.post(SCHEDULES, BODY, format="json")
    assert response.status_code == 201, response.json()
    return response.json()


def test_a_schedule_is_read_in_shanghai_unless_another_zone_is_given(created, owner_api, lifecycle):
    assert created["timezone"] == "Asia/Shanghai" and created["suspended"] is False
    assert created["next_run_at"].startswith("2026-03-02T02:00:00+08:00")
    with time_machine.travel(BEFORE_2AM, tick=False):
        berlin = owner_api.post(SCHEDULES, {**BODY, "timezone": "Europe/Berlin"}, format="json").json()
    assert berlin["next_run_at"].startswith("2026-03-02T09:00:00+08:00")  # 02:00 in Berlin is 09:00 in Shanghai
    assert [s["id"] for s in owner_api.get(SCHEDULES).json()["results"]] == [berlin["id"], created["id"]]


def test_its_runs_are_jobs_listed_with_the_schedule(created, owner_api):
    with time_machine.travel(datetime(2026, 3, 1, 18, 0, 3, tzinfo=UTC), tick=False):
        schedules.fire_due()
    runs = owner_api.get(f"{SCHEDULES}{created['id']}/runs").json()
    job = Job.objects.get()
    assert [(r["outcome"], r["job"]) for r in runs] == [("submitted", str(job.public_id))]
    assert owner_api.get(f"/api/v1/jobs/{job.public_id}").json()["name"] == "nightly"


def test_suspend_resume_and_delete(created, owner_api):
    url = f"{SCHEDULES}{created['id']}"
    suspended = owner_api.post(f"{url}/suspend")
    assert suspended.status_code == 200 and suspended.json()["suspended"] is True
    assert suspended.json()["next_run_at"] is None
    assert owner_api.post(f"{url}/suspend").status_code == 409
    resumed = owner_api.post(f"{url}/resume").json()
    assert resumed["suspended"] is False and resumed["next_run_at"]
    assert owner_api.delete(url).status_code == 204
    assert not JobSchedule.objects.exists()


def test_a_bad_expression_is_a_400_naming_the_field(owner_api, lifecycle):
    response = owner_api.post(SCHEDULES, {**BODY, "cron": "0 2 * *"}, format="json")
    assert response.status_code == 400 and "cron" in response.json()["errors"]
    response = owner_api.post(SCHEDULES, {**BODY, "timezone": "Mars/Olympus"}, format="json")
    assert response.status_code == 400 and "timezone" in response.json()["errors"]


@pytest.mark.parametrize(("method", "suffix"), [("get", ""), ("get", "/runs"), ("post", "/suspend"), ("delete", "")])
def test_someone_elses_schedule_is_a_404(created, stranger_api, anon_api, method, suffix):
    url = f"{SCHEDULES}{created['id']}{suffix}"
    assert getattr(stranger_api, method)(url).status_code == 404
    assert stranger_api.get(SCHEDULES).json()["results"] == []
    assert getattr(anon_api, method)(url).status_code in (401, 403)


def test_a_teams_read_only_member_sees_its_schedules_and_changes_none(owner, lifecycle):
    team = teams.create_team(owner, name="视觉实验室", slug="vision-lab")
    viewer = UserFactory(email="viewer@example.com")
    Membership.objects.create(team=team, user=viewer, role=Role.READ_ONLY)
    made = _api(owner, team).post(SCHEDULES, BODY, format="json")
    assert made.status_code == 201, made.json()
    as_viewer = _api(viewer, team)

    assert as_viewer.post(SCHEDULES, BODY, format="json").status_code == 403
    assert [s["id"] for s in as_viewer.get(SCHEDULES).json()["results"]] == [made.json()["id"]]
    url = f"{SCHEDULES}{made.json()['id']}"
    assert as_viewer.post(f"{url}/suspend").status_code == 403
    assert as_viewer.delete(url).status_code == 403
    assert JobSchedule.objects.get().suspended is False
