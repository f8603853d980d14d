"""The job schedule pages as a person sees them: a schedule made from the form on the Jobs pages, its next run in
its own zone, its runs, suspend and resume; a team's read-only member cannot make one, a stranger gets a 404."""

from datetime import UTC, datetime

import pytest
import time_machine

from jobs import schedules
from jobs.models import Job, JobSchedule
from teams import services as teams
from teams.context import SESSION_KEY
from teams.models import Membership
from teams.roles import Role
from tests.fixtures.factories import UserFactory

FORM = {
    "name": "nightly",
    "image": "pytorch-2.2-cuda12",
    "backend": "dcu",
    "cards": "1",
    "command": "python train.py",
    "timeout": "1",
    "timeout_unit": "3600",
    "retries": "0",
    "cron": "0 2 * * *",
    "timezone": "Asia/Shanghai",
}
BEFORE_2AM = datetime(2026, 3, 1, 17, 0, tzinfo=UTC)  # 01:00 in Shanghai


@pytest.fixture
def english(client, owner):
    client.force_login(owner)
    client.cookies["django_language"] = "en"
    return client


def test_a_schedule_made_on_the_jobs_pages_shows_its_next_run_and_its_runs(english, lifecycle):
    assert 'href="/jobs/schedules/"' in english.get("/jobs/").content.decode()
    assert english.get("/jobs/schedules/new/").status_code == 200
    with time_machine.travel(BEFORE_2AM, tick=False):
        response = english.post("/jobs/schedules/new/", FORM)
    schedule = JobSchedule.objects.get()
    assert response.status_code == 302 and response["Location"] == schedule.get_absolute_url()
    page = english.get(schedule.get_absolute_url()).content.decode()
    assert "2026-03-02 02:00 (Asia/Shanghai)" in page and "No run yet." in page

    with time_machine.travel(datetime(2026, 3, 1, 18, 0, 2, tzinfo=UTC), tick=False):
        schedules.fire_due()
    page = english.get(schedule.get_absolute_url()).content.decode()
    assert f'href="{Job.objects.get().get_absolute_url()}"' in page
    listing = english.get("/jobs/schedules/").content.decode()
    assert "nightly" in listing and "0 2 * * *" in listing


def test_suspend_and_resume_from_the_page(english, lifecycle):
    english.post("/jobs/schedules/new/", {**FORM, "cron": "@hourly"})
    schedule = JobSchedule.objects.get()
    english.post(f"/jobs/schedules/{schedule.public_id}/suspend/")
    page = english.get(schedule.get_absolute_url()).content.decode()
    assert 'id="resume-schedule"' in page and JobSchedule.objects.get().suspended
    english.post(f"/jobs/schedules/{schedule.public_id}/resume/")
    assert not JobSchedule.objects.get().suspended
    english.post(f"/jobs/schedules/{schedule.public_id}/delete/")
    assert not JobSchedule.objects.exists()


def test_a_bad_expression_is_shown_on_the_form(english, lifecycle):
    response = english.post("/jobs/schedules/new/", {**FORM, "cron": "at two"})
    assert response.status_code == 400
    assert "is not a schedule" in response.content.decode() and not JobSchedule.objects.exists()


def test_a_teams_read_only_member_cannot_make_or_suspend_its_schedules(client, owner, lifecycle):
    team = teams.create_team(owner, name="视觉实验室", slug="vision-lab")
    viewer = UserFactory(email="viewer@example.com")
    Membership.objects.create(team=team, user=viewer, role=Role.READ_ONLY)
    request = schedules.ScheduleRequest(job=schedules.services.JobRequest(**_job()), cron="@daily")
    made = schedules.create(team.account, request, by=owner)
    client.force_login(viewer)
    session = client.session
    session[SESSION_KEY] = team.slug
    session.save()

    assert client.post("/jobs/schedules/new/", FORM).status_code == 400
    assert not JobSchedule.objects.exclude(pk=made.pk).exists()
    assert "nightly" in client.get("/jobs/schedules/").content.decode()  # seen, read-only
    assert client.post(f"/jobs/schedules/{made.public_id}/suspend/").status_code == 403
    assert not JobSchedule.objects.get(pk=made.pk).suspended


def test_someone_elses_schedule_page_is_a_404(client, owner, stranger, lifecycle):
    made = schedules.create(
        owner, schedules.ScheduleRequest(job=schedules.services.JobRequest(**_job()), cron="@daily")
    )
    client.force_login(stranger)
    assert client.get(made.get_absolute_url()).status_code == 404
    assert client.post(f"/jobs/schedules/{made.public_id}/suspend/").status_code == 404
    assert "nightly" not in client.get("/jobs/schedules/").content.decode()


def _job() -> dict:
    return {"name": "nightly", "image": "pytorch-2.2-cuda12", "command": "python train.py", "backend": "dcu"}
