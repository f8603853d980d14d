"""`gpucloud jobs` against a real HTTP server: submit with --backend auto, ls, logs, cancel, rerun."""

import json

import pytest

from jobs.models import Job

from .conftest import drive

pytestmark = pytest.mark.django_db(transaction=True)


def test_submit_ls_cancel_rerun(cli, owner):
    code, out, err = cli(
        owner,
        "jobs",
        "submit",
        "--backend",
        "auto",
        "--cards",
        "1",
        "--image",
        "pytorch-2.2-cuda12",
        "--timeout",
        "1h",
        "--max-price",
        "3",
        "--",
        "python",
        "train.py",
        "--epochs=2",
    )
    assert code == 0, err
    job = Job.objects.get()
    assert (job.command, job.timeout_seconds, job.name) == ("python train.py --epochs=2", 3600, "python")
    assert f"{job.public_id}  queued (place 1)" in out and "DCU Z100: ¥1.44/h" in out

    drive()
    code, out, _ = cli(owner, "jobs", "ls", "--state", "running")
    assert code == 0 and "running" in out and "dcu-z100" in out
    code, out, _ = cli(owner, "jobs", "logs", str(job.public_id))
    assert "no logs" in out

    assert cli(owner, "jobs", "cancel", str(job.public_id))[0] == 0
    code, out, _ = cli(owner, "--json", "jobs", "show", str(job.public_id))
    assert json.loads(out)["state"] == "cancelled"
    assert cli(owner, "jobs", "rerun", str(job.public_id))[0] == 0
    assert Job.objects.count() == 2


def test_a_bad_timeout_and_someone_elses_job(cli, owner, stranger):
    with pytest.raises(SystemExit):
        cli(owner, "jobs", "submit", "--image", "x", "--timeout", "soon", "--", "true")
    code, _, _ = cli(owner, "jobs", "submit", "--image", "pytorch-2.2-cuda12", "--timeout", "1h", "--", "true")
    job = Job.objects.get()
    code, _, err = cli(stranger, "jobs", "cancel", str(job.public_id))
    assert code == 1 and "No such job" in err
