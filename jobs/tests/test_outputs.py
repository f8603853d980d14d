"""A job's outputs folder, ``jobs/<id>/`` in its owner's cloud storage: made when the job is placed, handed to the
command as $OUTPUT_DIR, named by the API and linked from the job's page."""

from django.db.models import F

from catalog.models import Node
from jobs.exits import report_exit
from storage import services as storage
from storage.models import Entry
from teams import services as teams

from .conftest import drive
from .helpers import fresh


def test_a_placed_job_has_its_outputs_folder_and_the_command_is_told_where(submit, owner, owner_api):
    job = submit(backend="dcu")
    assert not Entry.objects.filter(owner=owner, path=f"/jobs/{job.public_id}").exists()

    drive()
    job = fresh(job)
    assert Entry.objects.get(owner=owner, path=f"/jobs/{job.public_id}").is_folder
    assert job.instance.env["OUTPUT_DIR"] == f"/root/shared/jobs/{job.public_id}"
    assert owner_api.get(f"/api/v1/jobs/{job.public_id}").json()["outputs"] == f"/jobs/{job.public_id}"


def test_the_job_page_links_to_its_outputs_folder(submit, owner, owner_client):
    job = submit(backend="dcu")
    page = owner_client.get(job.get_absolute_url()).content.decode()
    assert 'id="job-outputs"' not in page  # not placed yet: no folder to open

    drive()
    folder = Entry.objects.get(owner=owner, path=f"/jobs/{job.public_id}")
    page = owner_client.get(job.get_absolute_url()).content.decode()
    assert f'href="/storage/folders/{folder.public_id}/" id="job-outputs"' in page


def test_a_retry_keeps_what_the_first_attempt_wrote(submit, owner, lifecycle):
    job = submit(backend="dcu", retries=1)
    drive()
    folder = Entry.objects.get(owner=owner, path=f"/jobs/{job.public_id}")
    report_exit(fresh(job).instance, 1)
    drive()
    assert fresh(job).attempts == 2
    assert Entry.objects.get(owner=owner, path=f"/jobs/{job.public_id}") == folder


def test_a_file_where_the_jobs_folder_should_be_fails_the_job_with_a_reason(submit, owner):
    storage.make_folders(owner, "/jobs")
    Entry.objects.filter(owner=owner, path="/jobs").update(kind="file")  # a file of that name in the way
    job = submit(backend="dcu")
    drive()
    job = fresh(job)
    assert job.state == "failed" and "/jobs" in job.state_detail
    assert job.instance is None


def test_a_teams_job_writes_to_the_teams_cloud_storage(owner, submit):
    team = teams.create_team(owner, name="视觉实验室", slug="vision-lab")
    account = team.account
    job = submit(user=account, backend="dcu")
    drive()
    job = fresh(job)
    assert job.instance.env["OUTPUT_DIR"] == f"/root/shared-team/jobs/{job.public_id}"
    assert Entry.objects.filter(owner=account, path=f"/jobs/{job.public_id}").exists()
    assert not Entry.objects.filter(owner=owner, path__startswith="/jobs").exists()


def test_a_job_that_waited_for_a_card_gets_its_outputs_folder_once_it_starts(submit, owner):
    Node.objects.filter(chip__slug="dcu-z100").update(cards_reserved=F("cards"))
    job = submit(backend="dcu")
    drive()
    assert fresh(job).state == "queued"  # tried, no card: nothing of the try is kept

    Node.objects.filter(chip__slug="dcu-z100").update(cards_reserved=0)
    drive()
    job = fresh(job)
    assert job.state == "running", job.state_detail
    assert Entry.objects.filter(owner=owner, path=f"/jobs/{job.public_id}", kind="folder").count() == 1
