"""A reclaimed spot job resumes from its checkpoint, end to end on the embedded default: a real sandbox runs
``train.py``, an on-demand launch reclaims the job's only card, the checkpoint signal makes the script save its step
in $OUTPUT_DIR, the job goes back to the queue, and once the card is free again it runs on a new machine and carries
on from the saved step."""

import io
import time

import pytest

from catalog.models import Node
from core.errors import ServiceError
from instances import launching, lifecycle
from jobs import running, services
from jobs.choices import State
from storage import services as storage

from .helpers import fresh
from .test_local_sandbox import run_until_finished

pytestmark = [pytest.mark.sandbox, pytest.mark.django_db(transaction=True)]

TRAIN = b"""import os, pathlib, signal, sys, time
ckpt = pathlib.Path(os.environ["OUTPUT_DIR"]) / "step.txt"
start = int(ckpt.read_text()) if ckpt.exists() else 0
print("resuming from step", start, flush=True)
if start:
    print("finished after step", start, flush=True)
    sys.exit(0)
step = 0
def save(signum, frame):
    ckpt.write_text(str(step))
    print("checkpoint at step", step, flush=True)
    sys.exit(143)
signal.signal(signal.SIGUSR1, save)
signal.signal(signal.SIGTERM, save)
while True:
    step += 1
    time.sleep(0.1)
"""


def _turn(until, message: str, timeout: float = 90.0) -> None:
    """The jobs beat and the instances' reconcile, as the worker runs them, until ``until()``."""
    deadline = time.monotonic() + timeout
    while not until():
        if time.monotonic() > deadline:
            raise AssertionError(f"waited for {message}")
        running.watch_active()
        running.place_queued()
        lifecycle.reconcile()
        time.sleep(0.3)


def test_a_reclaimed_spot_job_resumes_from_the_step_it_saved(on_local, submit, owner, settings):
    settings.INSTANCES_SPOT_NOTICE_SECONDS = 5
    # One Ascend card in the whole data centre.
    kept = Node.objects.filter(chip__slug="ascend-910b").order_by("pk").first()
    Node.objects.filter(chip__slug="ascend-910b").exclude(pk=kept.pk).update(drained=True)
    Node.objects.filter(pk=kept.pk).update(cards=1, cards_reserved=0)
    made = storage.create_upload(owner, folder_path="/", filename="train.py", length=len(TRAIN))
    storage.write_chunk(owner, made.public_id, offset=0, stream=io.BytesIO(TRAIN), content_length=len(TRAIN))
    job = submit(backend="npu", image="pytorch-2.2-cann8", spot=True, command="cd /root/shared && python3 train.py")

    _turn(lambda: fresh(job).state == State.RUNNING and "resuming from step 0" in _log(job), "the first run")
    time.sleep(2)  # some steps
    # An on-demand launch takes the card: the spot machine gets the checkpoint signal and goes.
    request = launching.LaunchRequest(name="taker", image="pytorch-2.2-cann8", chip="ascend-910b")
    taker = launching.launch(owner, request)
    _turn(lambda: fresh(job).state == State.QUEUED, "the job to go back to the queue")
    lifecycle.release(fresh(taker))

    job = run_until_finished(job, timeout=150)
    assert (job.state, job.exit_code) == (State.SUCCEEDED, 0), job.log
    assert "resuming from step 0" not in job.log  # the kept log is the second run's
    assert "finished after step" in job.log
    step = int(job.log.split("resuming from step", 1)[1].split()[0])
    assert step > 0
    assert job.events.filter(new=State.QUEUED, detail="its spot cards were reclaimed: back in the queue").exists()


def _log(job) -> str:
    try:
        return "\n".join(services.job_log(fresh(job)).lines)
    except ServiceError:  # its machine is not up yet
        return ""
