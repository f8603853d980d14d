"""Training curves (SPEC §6): the workload's scalars, forwarded by the agent, charted on the instance page; the
quick-start script that produces them; the simulated backend's curve, labelled simulated."""

import json
import math
import signal
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import pytest
import time_machine
from django.conf import settings
from django.utils import timezone
from rest_framework.test import APIClient

from agent import gpucloud_agent as agent
from instances import heartbeats as reports
from instances.backends.slurm import agent_token
from instances.models import TrainingScalar
from instances.tests.fixtures import settle
from instances.tests.test_slurm_agent_api import REPORT, agent_client, url

SCRIPT = Path(__file__).resolve().parents[1] / "workloads" / "quickstart_train.py"


def _series(path: Path, tag: str) -> list[tuple[int, float]]:
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    return [(s["step"], s["value"]) for s in lines if s["tag"] == tag]


def test_the_quick_start_script_converges_and_resumes_from_its_checkpoint(tmp_path):
    env = {"GPUCLOUD_SCALARS": str(tmp_path / "scalars.jsonl"), "PATH": "/usr/bin:/bin"}
    command = [
        sys.executable,
        str(SCRIPT),
        "--steps",
        "300",
        "--interval",
        "0.01",
        "--checkpoint",
        str(tmp_path / "data" / "ckpt.json"),
    ]
    first = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while len(_series(tmp_path / "scalars.jsonl", "loss") if (tmp_path / "scalars.jsonl").exists() else []) < 50:
        assert time.monotonic() < deadline and first.poll() is None
        time.sleep(0.05)
    first.send_signal(signal.SIGUSR1)  # the console's checkpoint signal (stop, spot preemption)
    assert first.wait(timeout=10) == 0 and "checkpoint at step" in first.stdout.read()
    stopped_at = json.loads((tmp_path / "data" / "ckpt.json").read_text())["step"]

    second = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)
    assert second.returncode == 0 and f"resuming from step {stopped_at}" in second.stdout
    loss = _series(tmp_path / "scalars.jsonl", "loss")
    steps = [step for step, _value in loss]
    assert steps == sorted(set(steps)) and steps[-1] == 300  # no step twice, none lost across the restart
    assert loss[-1][1] < loss[0][1] / 2  # it converges
    assert _series(tmp_path / "scalars.jsonl", "accuracy")[-1][1] > 0.85


def test_the_agent_forwards_only_new_complete_valid_lines(tmp_path):
    path = tmp_path / "scalars.jsonl"
    tail = agent.ScalarTail(path)
    assert tail.read() == []  # no file yet
    path.write_text('{"tag": "loss", "step": 1, "value": 0.9}\n{"tag": "loss", "step": 2, "value": 0.8}\n{"tag": "lo')
    assert [s["step"] for s in tail.read()] == [1, 2]  # the half-written third line waits
    with path.open("a") as f:
        f.write('ss", "step": 3, "value": 0.7, "time": 1767225600}\nnot json\n{"tag": "x", "step": -1, "value": 1}\n')
        f.write('{"tag": "loss", "step": 4, "value": NaN}\n{"tag": "", "step": 5, "value": 1}\n')
    [third] = tail.read()
    assert third == {"tag": "loss", "step": 3, "value": 0.7, "time": "2026-01-01T00:00:00+00:00"}
    assert tail.read() == []


def test_the_agent_starts_again_when_the_workload_rewrites_its_scalars_file(tmp_path):
    path = tmp_path / "scalars.jsonl"
    tail = agent.ScalarTail(path)
    path.write_text("".join(f'{{"tag": "loss", "step": {s}, "value": 0.5}}\n' for s in range(1, 4)))
    assert [s["step"] for s in tail.read()] == [1, 2, 3]
    path.write_text('{"tag": "loss", "step": 1, "value": 0.9}\n')  # truncated: a new run from scratch
    assert [s["step"] for s in tail.read()] == [1]
    replacement = tmp_path / "scalars.new"  # replaced by rename, with more than was read before
    replacement.write_text("".join(f'{{"tag": "acc", "step": {s}, "value": 0.5}}\n' for s in range(1, 6)))
    replacement.rename(path)
    assert [s["step"] for s in tail.read()] == [1, 2, 3, 4, 5]
    assert tail.read() == []


@pytest.mark.django_db
def test_the_curves_keep_the_newest_points_of_each_tag(launch, monkeypatch):
    monkeypatch.setattr(reports, "MAX_POINTS_PER_TAG", 3)
    instance = launch(chip="mlu370-x8", image="pytorch-2.2-neuware")
    now = timezone.now()
    TrainingScalar.objects.bulk_create(
        [TrainingScalar(instance=instance, tag="loss", step=s, value=1 / s, at=now) for s in range(1, 8)]
        + [TrainingScalar(instance=instance, tag="acc", step=s, value=s / 10, at=now) for s in (4, 2)]
    )
    assert reports.training_curves(instance) == {
        "acc": [(2, 0.2), (4, 0.4)],
        "loss": [(5, 1 / 5), (6, 1 / 6), (7, 1 / 7)],
    }


@pytest.mark.django_db
def test_reported_scalars_are_stored_once_and_drawn_per_tag(launch):
    instance = launch(chip="mlu370-x8", image="pytorch-2.2-neuware")
    client = agent_client(agent_token(instance.public_id))
    scalars = [{"tag": "loss", "step": s, "value": 1 / s} for s in range(1, 6)] + [
        {"tag": "accuracy", "step": 5, "value": 0.5}
    ]
    for _retry in range(2):  # a report retried after a timeout
        assert client.post(url(instance), REPORT | {"scalars": scalars}, format="json").status_code == 200
    assert TrainingScalar.objects.filter(instance=instance).count() == 6
    curves = reports.training_curves(instance)
    assert list(curves) == ["accuracy", "loss"] and curves["loss"][0] == (1, 1.0) and len(curves["loss"]) == 5

    bad = client.post(url(instance), REPORT | {"scalars": [{"tag": "loss", "step": "x", "value": 1}]}, format="json")
    assert bad.status_code == 400 and set(bad.json()) >= {"code", "message"}
    assert TrainingScalar.objects.filter(instance=instance).count() == 6  # nothing half-written


@pytest.mark.django_db
def test_the_instance_page_and_api_chart_the_simulated_quick_start_curve(launch, owner_client, owner_api, stranger_api):
    owner_client.cookies[settings.LANGUAGE_COOKIE_NAME] = "en"
    with time_machine.travel(timezone.now(), tick=False) as clock:
        instance = launch()
        settle()
        assert owner_client.get(f"/instances/{instance.public_id}/training/").json()["curves"] == {}
        clock.shift(timedelta(minutes=5))
        page = owner_client.get(f"/instances/{instance.public_id}/").content.decode()
        data = owner_client.get(f"/instances/{instance.public_id}/training/").json()
        api = owner_api.get(f"/api/v1/instances/{instance.public_id}/training").json()
    assert 'id="training-chart"' in page and "Training curves" in page
    assert data == api and data["simulated"] is True
    loss = data["curves"]["loss"]
    assert len(loss) == 60 and loss[0][0] == 1  # a step every 5 s for 5 minutes
    assert loss[-1][1] < loss[0][1] / 3 and all(math.isfinite(v) for _s, v in loss)
    assert data["curves"]["accuracy"][-1][1] > 0.8
    assert stranger_api.get(f"/api/v1/instances/{instance.public_id}/training").status_code == 404


@pytest.mark.django_db
def test_training_curves_need_the_owner(launch, client, stranger):
    instance = launch()
    assert client.get(f"/instances/{instance.public_id}/training/").status_code == 302  # to the login
    client.force_login(stranger)
    assert client.get(f"/instances/{instance.public_id}/training/").status_code == 404
    assert APIClient().get(f"/api/v1/instances/{instance.public_id}/training").status_code in (401, 403)
