"""Jobs run imported images: on the image's family, for its owner or its team, and for nobody else — through the
API, the service and `gpucloud jobs submit --image`."""

import pytest
from django.db.models import F
from django.test import Client
from django.urls import reverse

from accounts import services as console_services
from catalog.models import Node
from cli.main import main
from core.errors import Conflict, NotFound
from instances import launching, waiting
from jobs import schedules
from jobs import services as jobs
from jobs.choices import State
from jobs.models import Job, JobSchedule
from jobs.schedules import ScheduleRequest
from jobs.services import JobRequest
from marketplace.images import imports
from marketplace.models import Image
from teams import services as teams
from teams.models import Membership
from teams.roles import Role
from tests.fixtures.factories import UserFactory, top_up

from .helpers import fresh

pytestmark = pytest.mark.django_db

JOB = {"name": "train", "command": "python3 train.py", "backend": "auto", "cards": 1, "timeout_seconds": 3600}


def test_a_job_runs_an_imported_image_on_its_family(owner_api, lifecycle, owner, imported_image):
    variant = imported_image(owner, "cuda").variants.get().slug
    response = owner_api.post("/api/v1/jobs/", {**JOB, "image": variant}, format="json")
    body = response.json()
    assert response.status_code == 201, body
    job = Job.objects.get()
    assert job.image == variant and job.family == "cuda"


def test_a_stranger_cannot_run_someone_elses_imported_image_as_a_job(stranger_api, lifecycle, owner, imported_image):
    variant = imported_image(owner, "cuda").variants.get().slug
    response = stranger_api.post("/api/v1/jobs/", {**JOB, "image": variant}, format="json")
    assert response.status_code == 404, response.json()
    assert not Job.objects.exists()


def test_a_teams_imported_image_runs_as_the_teams_job_only(lifecycle, owner, imported_image):
    team = teams.create_team(owner, name="视觉实验室", slug="vision-lab")
    top_up(team.account)
    developer = UserFactory(email="developer@example.com")
    Membership.objects.create(team=team, user=developer, role=Role.DEVELOPER)
    variant = imported_image(team.account, "cuda").variants.get().slug
    request = JobRequest(name="train", image=variant, command="python3 train.py")

    job = jobs.submit(team.account, request, by=developer)

    assert job.owner == team.account and job.image == variant
    with pytest.raises(NotFound):
        jobs.submit(developer, request)  # in the developer's own account the team's image is not theirs


@pytest.mark.django_db(transaction=True)
def test_gpucloud_jobs_submit_takes_an_imported_image(
    live_server, tmp_path, monkeypatch, capsys, lifecycle, owner, imported_image
):
    monkeypatch.setenv("GPUCLOUD_CONFIG", str(tmp_path / "config.json"))
    token = console_services.create_api_token(owner, name="cli", scope="read_write").plaintext
    variant = imported_image(owner, "cuda").variants.get().slug
    argv = ["jobs", "submit", "--image", variant, "--timeout", "1h", "--", "python3", "train.py"]
    code = main(["--url", live_server.url, "--lang", "en", "--token", token, *argv])
    assert code == 0, capsys.readouterr().err
    assert Job.objects.get().image == variant
    assert "warning:" not in capsys.readouterr().err
    # On another family's cards: submitted, with the warning on stderr.
    code = main(["--url", live_server.url, "--lang", "en", "--token", token, *argv[:2], "--backend", "npu", *argv[2:]])
    assert code == 0 and "warning: This image is built for " in capsys.readouterr().err


def test_an_imported_image_a_queued_job_or_a_schedule_boots_from_is_not_removed(
    owner, lifecycle, imported_image, settings, tmp_path
):
    settings.IMAGE_IMPORT_ROOT = tmp_path / "images"
    image = imported_image(owner, "cuda")
    variant = image.variants.get().slug
    Node.objects.filter(chip__backend="cuda").update(cards_reserved=F("cards"))  # every CUDA card taken
    job = jobs.submit(owner, JobRequest(name="train", image=variant, command="python3 train.py", backend="cuda"))
    assert fresh(job).state == State.QUEUED

    with pytest.raises(Conflict, match="“train” is queued") as refused:
        imports.remove_image(owner, image)
    assert refused.value.code == "image_in_use"

    jobs.cancel(fresh(job))
    request = JobRequest(name="nightly", image=variant, command="python3 train.py", backend="cuda")
    schedule = schedules.create(owner, ScheduleRequest(job=request, cron="0 2 * * *"))
    with pytest.raises(Conflict, match="“nightly” runs jobs on this image"):
        imports.remove_image(owner, image)

    schedules.suspend(schedule)
    request = launching.LaunchRequest(name="notebook", image=variant, backend="cuda")
    entry = waiting.launch_or_wait(owner, request, wait=True)
    with pytest.raises(Conflict, match="waiting for a card boots from this image"):
        imports.remove_image(owner, image)

    waiting.cancel(entry)
    imports.remove_image(owner, image)
    assert not Image.objects.filter(pk=image.pk).exists()


def test_a_job_on_another_familys_cards_than_its_image_is_warned(owner_api, english, owner, lifecycle, imported_image):
    variant = imported_image(owner, "cuda").variants.get().slug
    body = {**JOB, "image": variant, "backend": "npu"}
    response = owner_api.post("/api/v1/jobs/", body, format="json", HTTP_ACCEPT_LANGUAGE="en")
    assert response.status_code == 201, response.json()
    [warning] = response.json()["warnings"]
    assert warning.startswith("This image is built for ") and "will likely find no accelerator" in warning
    assert Job.objects.get().family == "npu"  # submitted all the same
    # On its own family, nothing to say.
    same = owner_api.post("/api/v1/jobs/", {**body, "backend": "cuda"}, format="json").json()
    assert same["warnings"] == []
    # The page says it after submitting.
    form = {"name": "train", "image": variant, "backend": "npu", "cards": "1", "command": "python3 train.py"}
    form |= {"timeout": "1", "timeout_unit": "3600", "retries": "0"}
    page = english.post("/jobs/new/", form, follow=True).content.decode()
    assert "This image is built for" in page


@pytest.fixture
def removed_after_the_quote(owner, lifecycle, imported_image, settings, tmp_path, monkeypatch):
    """An imported image whose next job quote (a submission's or a new schedule's) is followed at once by the image's
    removal by its owner; returns the image and a job request for it."""
    settings.IMAGE_IMPORT_ROOT = tmp_path / "images"
    image = imported_image(owner, "cuda")
    quoted = jobs.quote_job

    def removed_meanwhile(*args, **kwargs):
        choice = quoted(*args, **kwargs)
        monkeypatch.setattr(jobs, "quote_job", quoted)
        imports.remove_image(owner, Image.objects.get(pk=image.pk))
        return choice

    monkeypatch.setattr(jobs, "quote_job", removed_meanwhile)
    return image, JobRequest(name="train", image=image.variants.get().slug, command="python3 train.py", backend="cuda")


def test_an_image_removed_after_a_submission_chose_it_queues_nothing(owner, removed_after_the_quote):
    # Given an imported image, removed by its owner right after a submission chose it
    image, request = removed_after_the_quote

    # Then the submission is refused as for an unknown image, and no job waits to boot the removed one
    with pytest.raises(NotFound) as refused:
        jobs.submit(owner, request)
    assert refused.value.code == "unknown_image"
    assert not Image.objects.filter(pk=image.pk).exists()
    assert not Job.objects.exists()


def test_an_image_removed_after_a_new_schedule_chose_it_saves_no_schedule(owner, removed_after_the_quote):
    image, request = removed_after_the_quote

    with pytest.raises(NotFound) as refused:
        schedules.create(owner, ScheduleRequest(job=request, cron="0 2 * * *"))

    assert refused.value.code == "unknown_image"
    assert not Image.objects.filter(pk=image.pk).exists()
    assert not JobSchedule.objects.exists()


def test_a_schedule_whose_image_was_removed_while_suspended_is_not_resumed(
    owner, lifecycle, imported_image, settings, tmp_path
):
    settings.IMAGE_IMPORT_ROOT = tmp_path / "images"
    image = imported_image(owner, "cuda")
    request = JobRequest(name="nightly", image=image.variants.get().slug, command="python3 train.py", backend="cuda")
    schedule = schedules.create(owner, ScheduleRequest(job=request, cron="0 2 * * *"))
    schedules.suspend(schedule)
    imports.remove_image(owner, image)  # a suspended schedule does not hold its image

    with pytest.raises(NotFound) as refused:
        schedules.resume(fresh(schedule))
    assert refused.value.code == "unknown_image"
    assert fresh(schedule).suspended and fresh(schedule).next_run_at is None

    # The schedule's page says so where the resume button was pressed, in the reader's language.
    browser = Client()
    browser.force_login(owner)
    browser.cookies["django_language"] = "zh-hans"
    page = browser.post(reverse("jobs:schedule-resume", args=[schedule.public_id]), follow=True)
    assert page.status_code == 200
    assert "已被删除" in page.content.decode()
    assert fresh(schedule).suspended
