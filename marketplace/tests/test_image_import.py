"""Importing an image from a registry through the service, against the tests' real registry on the loopback."""

import os
import stat
import subprocess

import pytest

from agent import gpucloud_agent as agent_module
from core.errors import ServiceError
from instances.backends import BackendError, local_image, slurm_image
from instances.backends.slurm import SlurmBackend
from marketplace.choices import ImageStatus, ImportStep
from marketplace.images import imports, oci, services
from marketplace.models import ImageImport
from marketplace.tests.registry_fixtures import MARKER, PASSWORD, USER, build_image, push
from storage.choices import UsageSource
from storage.models import StoredElsewhere


@pytest.fixture
def run_tasks(django_capture_on_commit_callbacks, eager_tasks):
    """Run the import task when the transaction that asked for it commits, as a worker would."""

    def start(*args, **kwargs):
        with django_capture_on_commit_callbacks(execute=True):
            image = imports.start_import(*args, **kwargs)
        image.refresh_from_db()
        return image

    return start


def test_a_private_image_is_imported_checked_and_counted_in_storage(owner, image_imports, tiny_image, run_tasks):
    image = run_tasks(owner, tiny_image, username=USER, password=PASSWORD)
    assert image.status == ImageStatus.READY, image.status_detail
    record = image.imported
    assert record.step == ImportStep.DONE and record.digest.startswith("sha256:")
    assert record.config["cmd"][0] == "/bin/sh"
    assert "GREETING=hello-from-the-image" in record.config["env"]
    assert record.checks == {
        "shell": True,
        "python": "",
        "jupyterlab": "",
        "lab_ports": False,
        "families": [],
        "family": "",
    }
    assert (oci.rootfs_of(record.tag) / "marker").read_text() == MARKER
    assert image.size_bytes > 1_000_000  # busybox
    assert StoredElsewhere.objects.get(owner=owner, source=UsageSource.IMAGES).size == image.size_bytes
    assert image.variants.get().family == ""


def test_the_password_is_stored_encrypted_and_only_until_the_import_ends(owner, image_imports, tiny_image):
    image = imports.start_import(owner, tiny_image, username=USER, password=PASSWORD)
    kept = ImageImport.objects.filter(image=image).values_list("password_encrypted", flat=True)
    assert kept.get() and PASSWORD not in kept.get()
    assert imports.run_import(image.pk) == ImageStatus.READY
    assert kept.get() == ""


def test_a_wrong_password_fails_the_import_with_the_registrys_reason(owner, image_imports, tiny_image, run_tasks):
    image = run_tasks(owner, tiny_image, username=USER, password="wrong")
    assert image.status == ImageStatus.FAILED
    assert "unauthorized" in image.status_detail.lower() or "authentication" in image.status_detail.lower()
    assert not oci.rootfs_of(image.imported.tag).exists()


def test_layers_are_stored_once_for_two_images(owner, stranger, image_imports, tiny_image, run_tasks):
    run_tasks(owner, tiny_image, username=USER, password=PASSWORD)
    blobs = set(os.listdir(oci.layout() / "blobs" / "sha256"))
    second = run_tasks(stranger, tiny_image, username=USER, password=PASSWORD)
    assert second.status == ImageStatus.READY
    assert set(os.listdir(oci.layout() / "blobs" / "sha256")) == blobs


def test_an_image_past_the_owners_storage_ceiling_is_refused(owner, settings, image_imports, tiny_image, run_tasks):
    settings.STORAGE_MAX_GB = 0.001  # about 1 MB: less than busybox
    image = run_tasks(owner, tiny_image, username=USER, password=PASSWORD)
    assert image.status == ImageStatus.FAILED
    assert "storage" in image.status_detail
    assert not StoredElsewhere.objects.filter(owner=owner, source=UsageSource.IMAGES).exists()


def test_a_manifest_past_the_size_limit_is_refused(owner, settings, image_imports, tiny_image, run_tasks):
    settings.IMAGE_MAX_MANIFEST_BYTES = 64
    image = run_tasks(owner, tiny_image, username=USER, password=PASSWORD)
    assert image.status == ImageStatus.FAILED
    assert "too large" in image.status_detail


def test_a_hostile_image_is_neutralised(owner, registry, image_imports, tmp_path, run_tasks):
    def hostile(root):
        (root / "bin" / "su").write_text("#!/bin/sh\n")
        (root / "bin" / "su").chmod(0o4755)
        (root / "bin" / "wall").write_text("#!/bin/sh\n")
        (root / "bin" / "wall").chmod(0o2755)
        (root / "dev").mkdir()
        os.mknod(root / "dev" / "mem", 0o666 | stat.S_IFCHR, os.makedev(1, 1))
        (root / "shadow").symlink_to("/etc/shadow")
        (root / "up").symlink_to("../../../../../etc/passwd")

    layout = build_image(tmp_path / "hostile", {}, cmd=["/bin/sh"], env=[], extra=hostile)
    reference = push(layout, registry, "team/hostile:1")
    image = run_tasks(owner, reference, username=USER, password=PASSWORD)
    assert image.status == ImageStatus.READY, image.status_detail
    root = oci.rootfs_of(image.imported.tag)
    for name in ("su", "wall"):
        assert not (root / "bin" / name).stat().st_mode & (stat.S_ISUID | stat.S_ISGID)
    # umoci's rootless unpack leaves an empty file where the device was; a device node would have been removed.
    mem = os.lstat(root / "dev" / "mem")
    assert stat.S_ISREG(mem.st_mode) and mem.st_size == 0
    assert os.readlink(root / "shadow") == "/etc/shadow"  # kept for the sandbox, where it names the image's own
    assert os.readlink(root / "up") == "../../../../../etc/passwd"
    assert "/bin/su" in image.imported.neutralised["cleared"]


def test_a_private_registry_is_refused_before_anything_is_sent(owner, image_imports):
    with pytest.raises(ServiceError) as refused:
        imports.start_import(owner, "10.0.0.8:5000/team/image:1")
    assert refused.value.code == "registry_refused"
    assert not ImageImport.objects.exists()


def test_removing_an_imported_image_frees_its_storage_and_keeps_shared_layers(
    owner, stranger, image_imports, tiny_image, run_tasks
):
    mine = run_tasks(owner, tiny_image, username=USER, password=PASSWORD)
    theirs = run_tasks(stranger, tiny_image, username=USER, password=PASSWORD)
    imports.remove_image(owner, mine)
    assert not oci.rootfs_of(mine.imported.tag).exists()
    assert not StoredElsewhere.objects.filter(owner=owner, source=UsageSource.IMAGES).exists()
    layers = [layer["digest"] for layer in oci.read(theirs.imported.tag)[1]["layers"]]
    assert all((oci.layout() / "blobs" / "sha256" / d.split(":")[1]).exists() for d in layers)


def test_an_image_instances_boot_from_is_not_removed_under_them(
    owner, image_imports, tiny_image, run_tasks, lifecycle, launch
):
    image = run_tasks(owner, tiny_image, username=USER, password=PASSWORD)
    launch(image=image.variants.get().slug, no_card=True)
    with pytest.raises(ServiceError) as refused:
        imports.remove_image(owner, image)
    assert refused.value.code == "image_in_use"
    assert oci.rootfs_of(image.imported.tag).exists()


def test_on_slurm_an_imported_image_boots_under_bubblewrap_from_the_nodes_view_of_the_image_store(
    owner, image_imports, tiny_image, run_tasks, lifecycle, launch, settings, tmp_path
):
    # Given an imported image, and a zone whose nodes see the image store at /mnt/images
    image = run_tasks(owner, tiny_image, username=USER, password=PASSWORD)
    instance = launch(image=image.variants.get().slug, no_card=True, env={"EPOCHS": "3"})
    (tmp_path / "cluster").mkdir()
    settings.SLURM = settings.SLURM | {"root": str(tmp_path / "cluster"), "image_root": "/mnt/images"}
    backend = SlurmBackend()
    config = backend.config(instance)
    root = local_image.ready_root(instance.image)

    # When its boot files and its job are written
    boot = slurm_image.write_boot(instance, config, root, backend.system_disk(instance, config), os.getgid())
    script, _job = backend.job_description(instance, config, image=root)

    # Then the job's agent runs the image's sandbox (no JupyterLab: its Python is not the platform's), which binds
    # the image's root where the nodes see it, read-only, and the instance's home
    assert "--jupyter" not in script and 'bwrap --args 3 "$@" --remount-ro /dev --info-fd 5' in script
    options = (boot / "bwrap.args").read_bytes().decode().split("\0")
    at = options.index("--ro-bind")
    assert options[at : at + 3] == ["--ro-bind", f"/mnt/images/rootfs/{image.imported.tag}", "/"]
    assert "--unshare-net" in options and "--disable-userns" in options
    # with the image's env under the owner's variables, and the image's CMD as the start command
    environment = (boot / "env").read_text()
    assert "export GREETING=hello-from-the-image" in environment and "export EPOCHS=3" in environment
    assert "LD_PRELOAD" not in environment
    assert "tiny image started" in (boot / "start").read_text()
    # and nobody but the console and the instance's account may read them, nor change them but the console
    assert stat.S_IMODE(boot.stat().st_mode) == 0o750
    assert {stat.S_IMODE((boot / name).stat().st_mode) for name in ("env", "init", "start", "bwrap.args")} == {0o440}


def test_a_card_machine_from_an_image_is_refused_on_slurm_where_no_device_files_are_named(
    owner, image_imports, tiny_image, run_tasks, launch, settings, tmp_path
):
    image = run_tasks(owner, tiny_image, username=USER, password=PASSWORD)
    instance = launch(image=image.variants.get().slug, chip="mlu370-x8", cards=1)
    settings.SLURM = settings.SLURM | {"root": str(tmp_path), "card_devices": {"mlu370": ["/dev/cambricon_ctl"]}}
    backend = SlurmBackend()

    with pytest.raises(BackendError, match="names no device files for"):
        backend.job_description(instance, backend.config(instance), image=local_image.ready_root(instance.image))


def _binds(devices, offset, cards):
    """What the job's shell hands bwrap, and its exit status, for the cards Slurm gave it."""
    script = slurm_image.device_binds(devices, offset) + 'printf "%s\\n" "$@"'
    done = subprocess.run(["/bin/sh", "-c", script], env={"SLURM_JOB_GPUS": cards}, capture_output=True, text=True)
    return done.returncode, done.stdout.splitlines()


def test_a_slurm_machine_from_an_image_binds_the_device_files_of_its_own_cards():
    # Cards 10 and 11 of the node, whose cards of this type start at 8: the driver's devices 2 and 3, then the
    # control device
    code, binds = _binds(["/dev/x{index}", "/dev/y {index}", "/fake/g{gres_index}", "/dev/ctl"], 8, "10,11")

    per_card = ["/dev/x2", "/dev/y 2", "/fake/g10", "/dev/x3", "/dev/y 3", "/fake/g11"]
    assert code == 0
    assert binds == [
        *(part for path in per_card for part in ("--dev-bind", path, path)),
        "--dev-bind-try",
        "/dev/ctl",
        "/dev/ctl",
    ]


def test_card_indexes_counted_per_type_already_are_kept_as_the_agent_keeps_them():
    # A single-type node numbers its cards from 0 whatever the zone's offset for the type
    binds = ["--dev-bind", "/dev/x2", "/dev/x2", "--dev-bind", "/dev/x3", "/dev/x3"]
    assert _binds(["/dev/x{index}"], 8, "2,3") == (0, binds)
    assert agent_module.local_cards("2,3", 8) == [2, 3] and agent_module.local_cards("10,11", 8) == [2, 3]


@pytest.mark.parametrize("cards", ["1;x", "", "2,$(id)", "08"])
def test_a_card_index_that_is_not_a_number_or_none_stops_the_machine_before_bwrap(cards):
    assert _binds(["/dev/x{index}"], 0, cards) == (70, [])


def test_an_imported_image_is_not_copied_into_one_that_would_boot_without_its_files(
    owner, image_imports, tiny_image, run_tasks
):

    image = run_tasks(owner, tiny_image, username=USER, password=PASSWORD)
    with pytest.raises(ServiceError) as refused:
        services.clone_to_mine(owner, image)
    assert refused.value.code == "imported_image"


def test_a_config_of_an_unexpected_shape_is_read_safely():
    assert imports.image_config({"config": "x"}) == {}
    assert imports.image_config([]) == {}
    odd = {"config": {"Cmd": "sh", "Env": ["A=1", 2], "ExposedPorts": {"80/tcp": {}, 1: {}}, "User": 0}}
    assert imports.image_config(odd) == {"env": ["A=1"], "exposed_ports": ["80/tcp"]}


def test_an_image_past_the_storage_left_is_refused_before_a_layer_is_downloaded(
    owner, settings, image_imports, tiny_image, run_tasks
):
    # Given an owner with about 1 MB of storage left: less than busybox's layer
    settings.STORAGE_MAX_GB = 0.001
    image = run_tasks(owner, tiny_image, username=USER, password=PASSWORD)
    # Then the import fails on the sizes the manifest declares, and no layer was written on this host
    assert image.status == ImageStatus.FAILED
    assert "storage is left" in image.status_detail
    assert not (oci.layout() / "blobs").exists()


def test_an_image_past_the_sites_largest_import_is_refused_before_a_layer_is_downloaded(
    owner, settings, image_imports, tiny_image, run_tasks
):
    settings.IMAGE_IMPORT_MAX_GB = 0.0005  # about 500 KB, with the owner's storage nearly empty
    image = run_tasks(owner, tiny_image, username=USER, password=PASSWORD)
    assert image.status == ImageStatus.FAILED
    assert "storage is left" in image.status_detail
    assert not (oci.layout() / "blobs").exists()


def test_a_layer_that_unpacks_to_far_more_than_it_says_fails_without_filling_the_disk(
    owner, settings, registry, image_imports, tmp_path, run_tasks
):
    # Given an image whose one layer is about 200 KB compressed and 200 MB unpacked, and 100 MB allowed
    def bomb(root):
        with open(root / "zeros", "wb") as zeros:
            for _ in range(200):
                zeros.write(bytes(1024 * 1024))

    layout = build_image(tmp_path / "bomb", {}, cmd=["/bin/sh"], env=[], extra=bomb)
    (tmp_path / "bomb" / "rootfs" / "zeros").unlink()  # the test's own copy
    reference = push(layout, registry, "team/bomb:1")
    settings.IMAGE_IMPORT_MAX_GB = 100 / 1024
    image = run_tasks(owner, reference, username=USER, password=PASSWORD)
    # Then the import fails saying why, and nothing of it is left: no root, no space, no mount
    assert image.status == ImageStatus.FAILED
    assert "unpack to more than the 100.0\xa0MB it may take" in image.status_detail
    assert not oci.rootfs_of(image.imported.tag).exists()
    assert not oci.rootfs_of(image.imported.tag).with_name(f"{image.imported.tag}.partial").exists()
    assert not list((image_imports / "unpacking").iterdir())
    assert str(image_imports) not in open("/proc/self/mountinfo").read()
