"""A data disk of a real Slurm job (``scripts/slurm-local.sh start``) appears in the machine under the name its page
shows, ``/root/data/<name>`` (the job's home is the machine's /root): hot-plugged, kept there by the agent on the
node, ``<name>-2`` beside another disk of that folder, gone when detached. A layout an older console wrote (the disk
by its bare id, at /root/data/<id>) still serves, and the next start moves the disk to its name."""

import json
import subprocess
import time
import uuid

import pytest

from instances import attachments
from instances.backends import get_backend
from instances.choices import Status
from instances.models import Instance
from storage import disks

pytestmark = [pytest.mark.slurm, pytest.mark.django_db(transaction=True)]


def fresh(instance):
    return Instance.objects.with_related().get(pk=instance.pk)


def enter(instance, command):
    """``command`` run inside the job, as its owner's account, in its home (the machine's /root)."""
    done = subprocess.run(
        get_backend("slurm").enter_argv(fresh(instance), command), capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def listing(instance) -> list[str]:
    return sorted(enter(instance, "ls -1 ~/data").splitlines())


def wait_for(condition, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def test_a_disk_is_at_root_data_under_its_name_in_the_job_beside_one_of_the_same_name_and_gone_when_detached(
    on_slurm, launch, owner, owner_client
):

    instance = launch(chip="mlu370-x8", cards=1, image="pytorch-2.2-neuware")
    on_slurm.settle()
    assert fresh(instance).status == Status.RUNNING, fresh(instance).status_detail
    journey = disks.create(owner, name="journey-disk", size_gb=1, zone=instance.zone)

    # Hot-plugged into the running job: there at once under its name, where its page says, read and written inside
    disks.attach(owner, journey.public_id, instance.public_id)
    assert journey.device_path == "/root/data/journey-disk"
    panel = owner_client.get(f"/storage/instances/{instance.public_id}/attachments/")  # the instance page's panel
    assert "/root/data/journey-disk" in panel.content.decode()
    assert listing(instance) == ["journey-disk"]
    assert enter(instance, "echo 旅程 > ~/data/journey-disk/kept.txt && cat ~/data/journey-disk/kept.txt") == "旅程\n"
    disk_folder = on_slurm.root / "disks" / str(journey.public_id)
    assert (disk_folder / "kept.txt").read_text() == "旅程\n"  # on the disk itself, which follows the instance

    # The agent on the node keeps it there: a link gone is back at the next heartbeat, under the name
    link = on_slurm.system_disk(instance) / "root" / "data" / "journey-disk"
    link.unlink()
    wait_for(link.is_symlink, "the agent to link the disk again")
    assert enter(instance, "cat ~/data/journey-disk/kept.txt") == "旅程\n"

    # Another disk whose folder would be the same (the backend's rule, as on the local backend): <name>-2
    other = str(uuid.uuid4())
    get_backend("slurm").attach_disk(fresh(instance), other, 1, name="journey-disk")
    assert listing(instance) == ["journey-disk", "journey-disk-2"]
    enter(instance, "echo other > ~/data/journey-disk-2/which")
    assert (on_slurm.root / "disks" / other / "which").read_text() == "other\n"

    # Detached: that disk's folder goes, the other stays where it is; the disk keeps its files
    disks.detach(owner, journey.public_id)
    assert listing(instance) == ["journey-disk-2"]
    assert (disk_folder / "kept.txt").read_text() == "旅程\n"


def test_a_layout_of_bare_ids_still_serves_the_disk_at_its_id_and_the_next_start_moves_it_to_its_name(
    on_slurm, launch, owner
):

    instance = launch(chip="mlu370-x8", cards=1, image="pytorch-2.2-neuware")
    on_slurm.settle()
    notes = disks.create(owner, name="notes", size_gb=1, zone=instance.zone)
    disks.attach(owner, notes.public_id, instance.public_id)
    enter(instance, "echo kept > ~/data/notes/file")

    # The layout as a console from before names wrote and applied it: the disk by its bare id
    disk_id = str(notes.public_id)
    get_backend("slurm")._edit_layout(fresh(instance), lambda layout: layout.update(disks=[disk_id]))
    layout = on_slurm.system_disk(instance) / ".gpucloud" / "layout.json"
    assert json.loads(layout.read_text())["disks"] == [disk_id]
    assert listing(instance) == [disk_id]
    assert enter(instance, f"cat ~/data/{disk_id}/file") == "kept\n"
    # and the agent on the node keeps it at /root/data/<id>
    link = on_slurm.system_disk(instance) / "root" / "data" / disk_id
    link.unlink()
    wait_for(link.is_symlink, "the agent to link the disk by its id again")

    # What a start hands the backend again moves it to its name; the other place goes
    attachments.apply(fresh(instance))
    assert listing(instance) == ["notes"]
    assert enter(instance, "cat ~/data/notes/file") == "kept\n"
    assert json.loads(layout.read_text())["disks"] == [{"id": disk_id, "folder": "notes"}]
