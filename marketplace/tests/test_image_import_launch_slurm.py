"""End to end on the local Slurm cluster: a tiny image built in the test (busybox, a marker file, a CMD, an env and
a Cambricon library, so it is an MLU image) is pushed to the tests' password-protected registry on the loopback,
imported by reference and launched on the cluster's MLU370 cards: the job's agent boots the image's root under
bubblewrap on the node, its CMD is the start command with its env, the host is out of sight, and it bills as any
machine."""

import os
import subprocess
import uuid

import pytest
from django.db import transaction

from instances import lifecycle as instance_lifecycle
from instances.backends import BackendError, get_backend
from instances.choices import Status
from instances.models import Instance
from instances.tests.ssh_fixtures import ssh
from marketplace.choices import ImageStatus
from marketplace.hub import repos as hub_repos
from marketplace.hub import services as hub_services
from marketplace.images import imports
from marketplace.tests.registry_fixtures import MARKER, PASSWORD, USER
from storage import disks, mounts

pytestmark = [pytest.mark.slurm, pytest.mark.sandbox, pytest.mark.django_db(transaction=True)]


def fresh(instance):
    return Instance.objects.with_related().get(pk=instance.pk)


def _indexes(ranges: str) -> list[int]:
    """Slurm's index list ("16-17", "16,18", "16-17,20") as numbers."""
    found = []
    for part in ranges.split(","):
        first, _dash, last = part.partition("-")
        found += range(int(first), int(last or first) + 1)
    return found


def enter(instance, command: str):
    """``command`` run inside the machine, as an SSH session runs it (``srun --overlap`` into the job)."""
    argv = get_backend("slurm").enter_argv(instance, command)
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)


def test_an_imported_image_boots_on_the_slurm_cluster_with_its_files_command_and_env(
    on_slurm, launch, owner, lifecycle, settings, tiny_mlu_image, eager_tasks, gateway, owner_key
):
    # Given the tiny MLU image imported by reference into the zone's shared root, where the node sees it
    settings.IMAGE_IMPORT_ROOT = on_slurm.root / "images"
    settings.IMAGE_IMPORT_ALLOW_LOOPBACK = True
    image = imports.start_import(owner, tiny_mlu_image, username=USER, password=PASSWORD)
    image.refresh_from_db()
    assert image.status == ImageStatus.READY, image.status_detail
    variant = image.variants.get()
    assert variant.family == "mlu"

    # When it is launched on two of the cluster's MLU370 cards
    instance = launch(image=variant.slug, chip="mlu370-x8", cards=2)
    on_slurm.settle(until=lambda: fresh(instance).status == Status.RUNNING, message="the machine to run")
    instance = fresh(instance)
    assert on_slurm.job_of(instance)["job_state"] == "RUNNING"

    # Then the image's files are its root, read over SSH (a step of the job, into the sandbox), with or without a
    # terminal, and its CMD ran with its env and its cards
    command = 'cat /marker; echo "user=$(id -u) greeting=$GREETING"; exit 3'
    shell = ssh(gateway.port, owner_key, instance.public_id, command)
    assert shell.returncode == 3, shell.stderr
    assert shell.stdout.decode() == MARKER + "user=0 greeting=hello-from-the-image\n", shell.stderr
    shell = ssh(gateway.port, owner_key, instance.public_id, "-tt", "tty; cat /marker")
    assert shell.returncode == 0 and b"/dev/pts/" in shell.stdout and MARKER.strip().encode() in shell.stdout, (
        shell.stderr
    )
    backend = get_backend("slurm")
    on_slurm.settle(
        until=lambda: "tiny image started" in backend.logs(fresh(instance), tail=20),
        timeout=30,
        message="the image's command",
    )
    assert "tiny image started: GREETING=hello-from-the-image cards=0,1" in backend.logs(fresh(instance), tail=20)
    listing = enter(instance, "ls /; ls /usr 2>&1; cat /etc/hostname")
    assert "marker" in listing.stdout and "No such file" in listing.stdout  # the image has no /usr; the node's not here
    assert f"gpu-{instance.public_id.hex[:8]}" in listing.stdout

    # The node is out of sight: no /etc/passwd (the image has none), of the zone's shared root only the folders of
    # disks and storage (no system disk, boot file or image store), not the registry on the node's loopback (the
    # machine's 127.0.0.1 is its own); and the image's root is read-only.
    assert enter(instance, "cat /etc/passwd").returncode != 0
    assert enter(instance, f"ls {on_slurm.root}").stdout.split() == ["disks", "hub", "shared"]
    port = tiny_mlu_image.split("/")[0].split(":")[1]
    reach = enter(instance, f"busybox wget -q -T 3 -O - http://127.0.0.1:{port}/v2/; echo rc=$?")
    assert "rc=0" not in reach.stdout
    assert enter(instance, "echo x > /marker").returncode != 0

    # Its two cards' device files are there (the local cluster's cards are files named by their GRES index), and
    # no other card's; /dev stays the machine's own, read-only
    job = on_slurm.job_of(instance)
    (detail,) = job["gres_detail"]  # e.g. gpu:mlu370:2(IDX:16-17)
    given = _indexes(detail.split("IDX:")[1].rstrip(")"))
    assert len(given) == 2 and all(16 <= index < 24 for index in given), detail
    cards = enter(
        instance, f"ls /var/lib/slurm/fakegpu; echo used > /var/lib/slurm/fakegpu/accel{given[0]}; echo rc=$?"
    )
    assert cards.stdout.split() == [f"accel{index}" for index in sorted(given, key=str)] + ["rc=0"], cards.stderr
    assert enter(instance, "touch /dev/extra").returncode != 0
    # What the machine writes in its home is on the system disk, where the agent reads it
    assert enter(instance, "echo kept > /root/note.txt").returncode == 0
    assert (on_slurm.system_disk(instance) / "root" / "note.txt").read_text() == "kept\n"

    # The owner's cloud storage is at /root/shared and a disk hot-plugged into the running machine at /root/data/<name>,
    # as in every machine: what the machine writes there is in the owner's folders on the node
    wrote = enter(instance, "echo stored > /root/shared/from-image.txt")
    assert wrote.returncode == 0, wrote.stderr
    assert (on_slurm.root / "shared" / str(owner.public_id) / "from-image.txt").read_text() == "stored\n"
    disk = disks.create(owner, name="image-disk", size_gb=1, zone=instance.zone)
    disks.attach(owner, disk.public_id, instance.public_id)
    wrote = enter(instance, "echo on-disk > /root/data/image-disk/from-image.txt")
    assert wrote.returncode == 0, wrote.stderr
    assert (on_slurm.root / "disks" / str(disk.public_id) / "from-image.txt").read_text() == "on-disk\n"
    # Another owner's disk in the same folder (its account's alone, as the console leaves every disk) is out of reach
    theirs = on_slurm.root / "disks" / str(uuid.uuid4())
    theirs.mkdir(mode=0o700)
    (theirs / "secret.txt").write_text("not yours\n")
    os.chown(theirs / "secret.txt", 1_600_000_999, 1_600_000_999)
    os.chown(theirs, 1_600_000_999, 1_600_000_999)
    peek = enter(instance, f"cat {theirs}/secret.txt")
    assert peek.returncode != 0 and "not yours" not in peek.stdout

    # A hub model mounted into the running machine has its files at /root/public/<repo>, read-only
    hub_services.save_item(repo="acme/tiny-model", summary="Tiny weights.")
    with transaction.atomic():
        hub_repos.publish_catalogue_files("acme/tiny-model", {"config.json": b'{"layers": 2}'}, "weights")
    mounts.mount(owner, fresh(instance), "acme/tiny-model")
    read = enter(instance, "cat /root/public/acme/tiny-model/config.json; echo x > /root/public/acme/tiny-model/new")
    assert read.stdout == '{"layers": 2}' and read.returncode != 0, read.stderr

    # It bills as any machine: one session, open while it runs, closed and charged once it is stopped
    [session] = lifecycle.sessions_of(instance)
    assert session.ended_at is None
    instance_lifecycle.stop(instance)
    on_slurm.settle(until=lambda: fresh(instance).status == Status.STOPPED, timeout=60, message="the stop")
    [session] = lifecycle.sessions_of(instance)
    assert session.ended_at is not None and lifecycle.charged(instance) > 0
    with pytest.raises(BackendError, match="not running"):
        get_backend("slurm").enter_argv(fresh(instance), "true")

    # Started again, it boots the image afresh with its home as it was; released, its boot files go too
    instance_lifecycle.start(fresh(instance))
    on_slurm.settle(until=lambda: fresh(instance).status == Status.RUNNING, message="the machine to run again")
    again = enter(fresh(instance), "cat /marker /root/note.txt")
    assert again.stdout == MARKER + "kept\n", again.stderr
    instance_lifecycle.release(fresh(instance))
    on_slurm.settle(timeout=60, message="the release")
    assert not (on_slurm.root / "boot" / str(instance.public_id)).exists()
    assert not on_slurm.system_disk(instance).exists()
