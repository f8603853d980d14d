"""`gpucloud jobs submit --cron … [--tz …]` and `gpucloud jobs schedules ls|runs|suspend|resume|rm` against a real
HTTP server."""

import json

import pytest

from jobs import schedules
from jobs.models import Job, JobSchedule

pytestmark = pytest.mark.django_db(transaction=True)


def test_submit_with_cron_saves_a_schedule_that_the_cli_manages(cli, owner):  # noqa: F811
    code, out, err = cli(
        owner,
        "jobs",
        "submit",
        "--image",
        "pytorch-2.2-cuda12",
        "--backend",
        "dcu",
        "--timeout",
        "1h",
        "--cron",
        "0 2 * * *",
        "--tz",
        "Europe/Berlin",
        "--",
        "python",
        "train.py",
    )
    assert code == 0, err
    schedule = JobSchedule.objects.get()
    assert (schedule.cron, schedule.timezone, schedule.command) == ("0 2 * * *", "Europe/Berlin", "python train.py")
    assert not Job.objects.exists()  # nothing runs before it is due
    assert str(schedule.public_id) in out and "0 2 * * * (Europe/Berlin)" in out

    code, out, _ = cli(owner, "jobs", "schedules", "ls")
    assert code == 0 and str(schedule.public_id) in out and "Europe/Berlin" in out
    assert cli(owner, "jobs", "schedules", "suspend", str(schedule.public_id))[0] == 0
    assert JobSchedule.objects.get().suspended
    code, _, err = cli(owner, "jobs", "schedules", "suspend", str(schedule.public_id))
    assert code == 1 and "suspended already" in err
    assert cli(owner, "jobs", "schedules", "resume", str(schedule.public_id))[0] == 0

    JobSchedule.objects.update(next_run_at=schedule.created_at)  # due now
    schedules.fire_due()
    code, out, _ = cli(owner, "--json", "jobs", "schedules", "runs", str(schedule.public_id))
    assert [run["outcome"] for run in json.loads(out)] == ["submitted"]
    assert cli(owner, "jobs", "schedules", "rm", str(schedule.public_id))[0] == 0
    assert not JobSchedule.objects.exists() and Job.objects.count() == 1


def test_a_bad_cron_is_refused_by_the_server(cli, owner):  # noqa: F811
    code, _, err = cli(owner, "jobs", "submit", "--image", "x", "--timeout", "1h", "--cron", "nightly", "--", "true")
    assert code == 1 and "is not a schedule" in err
