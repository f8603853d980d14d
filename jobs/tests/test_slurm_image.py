"""A job from an imported container image on the real local Slurm cluster: its command runs inside the image's root
on the cluster's node, and the job ends with the command's exit code."""

import pytest

from jobs.choices import State
from marketplace.choices import ImageStatus
from marketplace.images import imports
from marketplace.tests.registry_fixtures import MARKER, PASSWORD, USER

from .test_slurm import finished, run_until

pytestmark = [pytest.mark.slurm, pytest.mark.sandbox, pytest.mark.django_db(transaction=True)]


def test_a_job_from_an_imported_image_runs_in_it_on_the_cluster_and_fails_with_its_exit_code(
    submit, on_slurm, owner, owner_api, settings, tiny_mlu_image, eager_tasks
):
    # Given the tiny MLU image imported into the zone's shared root
    settings.IMAGE_IMPORT_ROOT = on_slurm.root / "images"
    settings.IMAGE_IMPORT_ALLOW_LOOPBACK = True
    image = imports.start_import(owner, tiny_mlu_image, username=USER, password=PASSWORD)
    image.refresh_from_db()
    assert image.status == ImageStatus.READY, image.status_detail

    # When a job runs a failing command from it on an MLU370 card
    job = submit(backend="mlu", cards=1, image=image.variants.get().slug, command="cat /marker; ls /usr; exit 3")

    # Then the command ran inside the image (its marker; no /usr of the node's) and the job failed with its code
    job = run_until(job, finished, on_slurm, message="the job to end")
    assert (job.state, job.exit_code) == (State.FAILED, 3), job.state_detail
    lines = owner_api.get(f"/api/v1/jobs/{job.public_id}/logs").json()["lines"]
    assert lines[:2] == [MARKER.strip(), "ls: /usr: No such file or directory"], lines
