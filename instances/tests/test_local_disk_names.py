"""A data disk of a real machine of the local backend appears inside under the name its page shows,
``/root/data/<name>``: attached while the machine runs, kept across a stop and a start, gone from
``/root/data`` when detached."""

import shlex

import pytest

from instances import lifecycle
from instances.backends import get_backend
from instances.choices import Status
from instances.models import Instance
from storage import disks

pytestmark = [pytest.mark.sandbox, pytest.mark.django_db(transaction=True)]


def fresh(instance):
    return Instance.objects.with_related().get(pk=instance.pk)


def listing(on_local, instance) -> list[str]:
    return on_local.run(fresh(instance), "ls -1 /root/data").stdout.splitlines()


def test_a_disk_is_at_root_data_under_its_name_hot_plugged_restarted_and_detached(on_local, running):

    instance = running()
    owner = instance.owner
    journey = disks.create(owner, name="journey-disk", size_gb=1, zone=instance.zone)
    notes = disks.create(owner, name="实验 数据", size_gb=1, zone=instance.zone)

    # Attached while the machine runs: there at once, under the names the disks' pages show.
    disks.attach(owner, journey.public_id, instance.public_id)
    disks.attach(owner, notes.public_id, instance.public_id)
    assert journey.device_path == "/root/data/journey-disk"
    assert sorted(listing(on_local, instance)) == ["journey-disk", "实验 数据"]
    wrote = on_local.run(fresh(instance), f"echo 旅程 > {shlex.quote(notes.device_path)}/kept.txt")
    assert wrote.returncode == 0, wrote.stderr

    # Across a stop and a start, the same names and files.
    lifecycle.stop(fresh(instance))
    on_local.settle(until=lambda: fresh(instance).status == Status.STOPPED, message="the stop")
    lifecycle.start(fresh(instance))
    on_local.settle(until=lambda: fresh(instance).status == Status.RUNNING, message="the start")
    assert sorted(listing(on_local, instance)) == ["journey-disk", "实验 数据"]
    kept = on_local.run(fresh(instance), f"cat {shlex.quote(notes.device_path)}/kept.txt")
    assert kept.stdout == "旅程\n", kept.stderr

    # Detached: gone from /root/data, no empty folder left; the other stays.
    disks.detach(owner, journey.public_id)
    assert listing(on_local, instance) == ["实验 数据"]


def test_two_disks_of_one_name_each_get_a_folder_of_their_own(on_local, running):
    instance = running()
    backend = get_backend("local")
    backend.attach_disk(instance, "disk-a", 1, name="data")
    backend.attach_disk(instance, "disk-b", 1, name="data")
    backend.attach_disk(instance, "disk-a", 2, name="data")  # grown: stays where it is
    on_local.run(instance, "echo a > /root/data/data/which && echo b > /root/data/data-2/which")
    assert listing(on_local, instance) == ["data", "data-2"]
    assert (on_local.root / "disks" / "disk-a" / "which").read_text() == "a\n"
