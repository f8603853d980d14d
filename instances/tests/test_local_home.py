"""The local backend's homes as loop-mounted ext4 images, without a sandbox: made, mounted, unmounted, borrowed
and deleted on the host; a plain folder where the host cannot make one; what the instance page says.

The image tests need root and loop devices, and skip without them; the sandbox tests (test_local_sandbox.py)
write past the size from inside a machine.
"""

import shutil
from pathlib import Path

import pytest
from django.template.loader import render_to_string
from django.utils import translation

from instances.backends import BackendError, TransientBackendError, local_home

UID = 1_000_000_001


@pytest.fixture
def base(tmp_path):
    """An instance's folder, released when the test ends: no mount or loop device of it may be left."""
    folder = tmp_path / "instance"
    folder.mkdir()
    yield folder
    image = folder / local_home.IMAGE
    attached = local_home.loop_devices(image)
    local_home.delete(folder)
    still = [device for device in attached if Path(f"/sys/block/{Path(device).name}/loop").exists()]
    left = local_home._is_mounted(folder / local_home.HOME), still
    assert left == (False, []), f"release left the home mounted or its loop device attached: {left}"


needs_loop = pytest.mark.skipif(bool(local_home.unavailable()), reason=f"no loop mounts: {local_home.unavailable()}")


@needs_loop
def test_a_new_home_is_an_image_of_the_system_disk_mounted_until_it_is_unmounted(base):
    home, image = base / local_home.HOME, base / local_home.IMAGE

    assert local_home.prepare(base, UID, 2) == 2
    assert image.stat().st_size == 2 * 1024**3 and image.stat().st_blocks * 512 < 16 * 1024**2  # sparse
    assert local_home._is_mounted(home) and home.stat().st_uid == UID and list(home.iterdir()) == []
    assert shutil.disk_usage(home).total <= 2 * 1024**3
    (home / "kept.txt").write_text("kept")

    local_home.unmount(base)
    assert not local_home._is_mounted(home) and local_home.loop_devices(image) == []
    assert list(home.iterdir()) == []  # the files are in the image, not in the folder under it

    assert local_home.prepare(base, UID, 2) == 2  # a start: the same files
    assert (home / "kept.txt").read_text() == "kept"


@needs_loop
def test_a_stopped_home_is_mounted_only_while_it_is_read_and_release_deletes_it(base):
    local_home.prepare(base, UID, 1)
    (base / local_home.HOME / "f").write_text("x")
    local_home.unmount(base)

    with local_home.opened(base) as home:
        assert (home / "f").read_text() == "x"
    assert not local_home._is_mounted(base / local_home.HOME)

    local_home.delete(base)
    assert not (base / local_home.IMAGE).exists() and not (base / local_home.HOME).exists()


def test_without_loop_devices_a_new_home_is_a_plain_folder_or_refused_where_a_limit_is_required(
    base, settings, monkeypatch, caplog
):
    monkeypatch.setattr(local_home, "unavailable", lambda: "no /dev/loop-control (a container without loop devices)")

    assert local_home.prepare(base, UID, 1) == 0
    assert not (base / local_home.IMAGE).exists() and (base / local_home.HOME).is_dir()
    assert "plain folder without a size limit" in caplog.text

    settings.LOCAL_HOME_QUOTA = "on"
    with pytest.raises(BackendError):
        local_home.prepare(base, UID, 1)


def test_a_plain_folder_home_with_files_stays_a_folder_with_them(base, settings):
    settings.LOCAL_HOME_QUOTA = "auto"
    (base / local_home.HOME).mkdir()
    (base / local_home.HOME / "notebook.ipynb").write_text("{}")

    assert local_home.prepare(base, UID, 1) == 0
    assert (base / local_home.HOME / "notebook.ipynb").read_text() == "{}"
    assert not (base / local_home.IMAGE).exists()


def test_the_instance_page_says_how_big_the_home_may_grow_or_that_it_has_no_limit():
    def page(**access):
        instance = {"status": "running", "access": {"sandbox": True, **access}}
        with translation.override("en"):
            return render_to_string("instances/partials/sandbox_access.html", {"instance": instance})

    limited = page(disk_gb=50, limited=True)
    assert "at most 50 GB" in limited and "sandbox-disk-unlimited" not in limited and "sandbox-unlimited" not in limited
    unlimited = page(disk_gb=0, limited=False)
    assert 'id="sandbox-disk-unlimited"' in unlimited and 'id="sandbox-unlimited"' in unlimited
    assert "sandbox-disk-unlimited" not in page()  # an instance started before the backend said either


@needs_loop
def test_an_image_that_cannot_be_made_on_a_capable_host_is_tried_again_never_left_a_folder(base, monkeypatch):

    real_run = local_home._run

    def full_disk(argv):
        if argv[0] == "mkfs.ext4":
            raise TransientBackendError("mkfs.ext4: No space left on device")
        return real_run(argv)

    monkeypatch.setattr(local_home, "_run", full_disk)
    with pytest.raises(TransientBackendError):
        local_home.prepare(base, UID, 1)
    assert not (base / local_home.IMAGE).exists() and not any((base / local_home.HOME).iterdir())

    monkeypatch.setattr(local_home, "_run", real_run)  # the host has room again: the next start makes the image
    assert local_home.prepare(base, UID, 1) == 1 and local_home._is_mounted(base / local_home.HOME)
