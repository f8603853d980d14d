"""An imported root file system made safe on the host: setuid/setgid bits cleared, device nodes removed, symlinks
never followed (they stay as they are, for the sandbox to resolve inside the image), and its size bounded."""

import os
import stat

import pytest

from marketplace.images import rootfs


@pytest.fixture
def image_root(tmp_path):
    root = tmp_path / "rootfs"
    (root / "bin").mkdir(parents=True)
    (root / "bin" / "busybox").write_bytes(b"\x7fELF" + b"0" * 96)
    (root / "bin" / "busybox").chmod(0o755)
    (root / "bin" / "sh").symlink_to("/bin/busybox")  # absolute: resolves inside the image, not on the host
    return root


def test_setuid_and_setgid_bits_are_cleared(image_root):
    tool = image_root / "bin" / "su"
    tool.write_text("x")
    tool.chmod(0o6755)
    scan = rootfs.neutralise(str(image_root), limit=10**6)
    assert stat.S_IMODE(tool.stat().st_mode) == 0o755
    assert scan.cleared == ["/bin/su"]


@pytest.mark.skipif(os.geteuid() != 0, reason="making a device node needs root")
def test_device_nodes_are_removed(image_root):
    (image_root / "dev").mkdir()
    os.mknod(image_root / "dev" / "mem", 0o666 | stat.S_IFCHR, os.makedev(1, 1))
    os.mknod(image_root / "dev" / "sda", 0o666 | stat.S_IFBLK, os.makedev(8, 0))
    scan = rootfs.neutralise(str(image_root), limit=10**6)
    assert sorted(scan.removed) == ["/dev/mem", "/dev/sda"]
    assert list((image_root / "dev").iterdir()) == []


def test_symlinks_out_of_the_image_are_left_as_they_are_and_never_followed(image_root, tmp_path):
    host_file = tmp_path / "host-setuid"
    host_file.write_text("the host's")
    host_file.chmod(0o4755)
    (image_root / "abs").symlink_to(str(host_file))
    (image_root / "up").symlink_to("../../../../../../" + str(host_file))
    (image_root / "hostdir").symlink_to(str(tmp_path))
    scan = rootfs.neutralise(str(image_root), limit=10**6)
    assert stat.S_IMODE(host_file.stat().st_mode) == 0o4755  # the host's file is untouched
    assert os.readlink(image_root / "abs") == str(host_file)
    assert os.readlink(image_root / "up").startswith("../../")
    assert scan.size == 100  # the busybox stand-in alone: nothing counted through the links


def test_lookups_resolve_links_inside_the_image_root(image_root, tmp_path):
    (image_root / "etc").mkdir()
    (image_root / "etc" / "os-release").write_text("image")
    (image_root / "escape").symlink_to("../../../../../../etc")
    assert rootfs.executable(str(image_root), "/bin/sh")  # /bin/sh → /bin/busybox, in the image
    inside = rootfs.lookup(str(image_root), "/escape/os-release")
    assert inside is not None and inside.st_ino == (image_root / "etc" / "os-release").stat().st_ino
    assert rootfs.lookup(str(image_root), "/escape/passwd") is None  # the host's /etc/passwd is not reached


def test_a_symlink_loop_is_not_found(image_root):
    (image_root / "a").symlink_to("b")
    (image_root / "b").symlink_to("a")
    assert rootfs.lookup(str(image_root), "/a") is None


def test_files_past_the_limit_are_refused(image_root):
    (image_root / "big").write_bytes(b"0" * 5000)
    with pytest.raises(rootfs.TooLarge):
        rootfs.neutralise(str(image_root), limit=1000)


def test_hard_links_are_counted_once(image_root):
    os.link(image_root / "bin" / "busybox", image_root / "bin" / "again")
    assert rootfs.neutralise(str(image_root), limit=10**6).size == 100


def test_python_jupyterlab_and_the_chip_family_are_detected(image_root):
    (image_root / "usr" / "bin").mkdir(parents=True)
    for name in ("python3", "jupyter-lab"):
        (image_root / "usr" / "bin" / name).write_text("#!")
        (image_root / "usr" / "bin" / name).chmod(0o755)
    lib = image_root / "usr" / "local" / "cuda" / "lib64"
    lib.mkdir(parents=True)
    (lib / "libcudart.so.12").write_text("")
    (image_root / "usr" / "lib").mkdir()
    (image_root / "usr" / "lib" / "libascendcl.so").write_text("")
    scan = rootfs.neutralise(str(image_root), limit=10**6)
    found = rootfs.checks(str(image_root), ["PATH=/usr/bin:/bin"], scan.families)
    assert found == {
        "shell": True,
        "python": "/usr/bin/python3",
        "jupyterlab": "/usr/bin/jupyter-lab",
        "lab_ports": False,  # no jupyter-server-proxy beside it
        "families": ["cuda", "npu"],
        "family": "npu",  # a domestic stack beside CUDA: a migration image, suggested as the domestic one
    }


def _lab(root, prefix: str) -> None:
    lab = root / prefix.lstrip("/") / "bin" / "jupyter-lab"
    lab.parent.mkdir(parents=True)
    lab.write_text("#!/bin/sh\n")
    lab.chmod(0o755)


def _proxy(root, prefix: str, version: str = "python3.11", packages: str = "site-packages") -> None:
    (root / prefix.lstrip("/") / "lib" / version / packages / "jupyter_server_proxy").mkdir(parents=True)


def test_the_port_buttons_need_jupyter_server_proxy_beside_the_images_own_lab(image_root):
    _lab(image_root, "/opt/conda")
    assert rootfs.checks(str(image_root), ["PATH=/opt/conda/bin:/bin"], [])["lab_ports"] is False
    _proxy(image_root, "/opt/conda")
    assert rootfs.checks(str(image_root), ["PATH=/opt/conda/bin:/bin"], [])["lab_ports"] is True


def test_the_labs_prefix_is_where_its_links_lead_inside_the_image(image_root):
    # /usr/local/bin/jupyter-lab links to the conda environment's, which is itself a link to another folder
    _lab(image_root, "/opt/miniconda3")
    _proxy(image_root, "/opt/miniconda3", version="python3.12")
    (image_root / "opt" / "conda").symlink_to("/opt/miniconda3")
    (image_root / "usr" / "local" / "bin").mkdir(parents=True)
    (image_root / "usr" / "local" / "bin" / "jupyter-lab").symlink_to("/opt/conda/bin/jupyter-lab")
    found = rootfs.checks(str(image_root), ["PATH=/usr/local/bin:/bin"], [])
    assert found["jupyterlab"] == "/usr/local/bin/jupyter-lab" and found["lab_ports"] is True


def test_a_link_to_the_hosts_packages_is_read_inside_the_image(image_root, tmp_path):
    # The image's lib links to a host path that holds the package: inside the image there is none
    host = tmp_path / "host-lib"
    _proxy(host, "/")
    _lab(image_root, "/usr")
    (image_root / "usr" / "lib").symlink_to(str(host / "lib"))
    assert rootfs.lab_opens_ports(str(image_root), "/usr/bin/jupyter-lab") is False
