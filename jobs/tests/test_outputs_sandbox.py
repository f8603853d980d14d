"""A job's outputs on the embedded default, end to end: a real sandbox runs ``train.py`` from the owner's cloud
storage, the script writes into $OUTPUT_DIR, and the storage API lists the file with its bytes after the job."""

import io

import pytest

from jobs.choices import State
from storage import services as storage

from .test_local_sandbox import run_until_finished

pytestmark = [pytest.mark.sandbox, pytest.mark.django_db(transaction=True)]

TRAIN = b"""import os, pathlib
out = pathlib.Path(os.environ["OUTPUT_DIR"])
(out / "model.bin").write_bytes(b"w" * 12345)
print("saved to", out)
"""


def test_what_train_py_writes_to_output_dir_is_in_cloud_storage_after_the_job(on_local, submit, owner, owner_api):
    made = storage.create_upload(owner, folder_path="/", filename="train.py", length=len(TRAIN))
    storage.write_chunk(owner, made.public_id, offset=0, stream=io.BytesIO(TRAIN), content_length=len(TRAIN))

    job = submit(backend="cpu", image="ubuntu-22.04", command="cd /root/shared && python3 train.py", name="outputs")
    job = run_until_finished(job)

    assert (job.state, job.exit_code) == (State.SUCCEEDED, 0), job.log
    assert f"saved to /root/shared/jobs/{job.public_id}" in job.log
    listed = owner_api.get("/api/v1/storage/entries", {"path": f"/jobs/{job.public_id}"}).json()["results"]
    assert [(entry["name"], entry["size"]) for entry in listed] == [("model.bin", 12345)]
