"""Hostile layers as a registry serves them: hard links to files of an earlier layer or of the host, whiteouts that
remove files of an earlier layer or reach outside the image, and links the console later reads through (the image's
/etc/passwd, its entrypoint). Each is neutralised inside the image's own root or refused; the host is untouched."""

import io
import os
import subprocess
import tarfile

import pytest

from marketplace.choices import ImageStatus
from marketplace.images import imports, oci, rootfs
from marketplace.tests.registry_fixtures import PASSWORD, USER, build_image, push

pytestmark = pytest.mark.django_db


@pytest.fixture
def run_tasks(django_capture_on_commit_callbacks, eager_tasks):
    def start(*args, **kwargs):
        with django_capture_on_commit_callbacks(execute=True):
            image = imports.start_import(*args, **kwargs)
        image.refresh_from_db()
        return image

    return start


def layer(members: list[tarfile.TarInfo | tuple[tarfile.TarInfo, bytes]]) -> bytes:
    """An uncompressed layer tar with exactly these members, names and link targets as given."""
    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for member in members:
            info, body = member if isinstance(member, tuple) else (member, None)
            archive.addfile(info, io.BytesIO(body) if body is not None else None)
    return data.getvalue()


def entry(name: str, kind=tarfile.REGTYPE, *, target: str = "", body: bytes = b"") -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.type, info.linkname, info.mode, info.size = kind, target, 0o644, len(body) if kind == tarfile.REGTYPE else 0
    return info, body


def image_with_layers(tmp_path, registry, name, files, *layers) -> str:
    """The tiny base image with ``files``, then each of ``layers`` added on top as it is; pushed, its reference."""
    layout = build_image(tmp_path / name, files, cmd=["/bin/sh"], env=[])
    for number, data in enumerate(layers):
        path = tmp_path / f"{name}-{number}.tar"
        path.write_bytes(data)
        subprocess.run(["umoci", "raw", "add-layer", "--image", f"{layout}:latest", str(path)], check=True)
    return push(layout, registry, f"team/{name}:1")


def test_a_hard_link_to_an_earlier_layers_file_stays_inside_the_image(
    owner, registry, image_imports, tmp_path, run_tasks
):
    upper = layer([entry("again", tarfile.LNKTYPE, target="data/original")])
    reference = image_with_layers(tmp_path, registry, "links", {"/data/original": "first layer\n"}, upper)
    image = run_tasks(owner, reference, username=USER, password=PASSWORD)
    assert image.status == ImageStatus.READY, image.status_detail
    root = oci.rootfs_of(image.imported.tag)
    assert (root / "again").read_text() == "first layer\n"
    assert os.lstat(root / "again").st_ino == os.lstat(root / "data" / "original").st_ino


def test_a_hard_link_to_a_host_file_never_links_the_hosts_file(owner, registry, image_imports, tmp_path, run_tasks):
    # Given a file on the host beside the image's folder, and a layer hard-linking to it by a climbing and an
    # absolute path
    victim = tmp_path / "host-secret"
    victim.write_text("the host's\n")
    climbing = os.path.relpath(victim, "/")
    upper = layer(
        [
            entry("up", tarfile.LNKTYPE, target="../" * 30 + climbing),
            entry("absolute", tarfile.LNKTYPE, target=str(victim)),
        ]
    )
    reference = image_with_layers(tmp_path, registry, "hostlinks", {}, upper)
    image = run_tasks(owner, reference, username=USER, password=PASSWORD)
    # Then umoci resolves the targets inside the image's root, where they are not: the import fails, says so, and
    # the host's file has still its one link
    assert image.status == ImageStatus.FAILED
    assert image.status_detail.startswith("The image's layers cannot be unpacked")
    assert os.stat(victim).st_nlink == 1
    assert not oci.rootfs_of(image.imported.tag).exists()


def test_whiteouts_remove_an_earlier_layers_files_and_never_anything_outside(
    owner, registry, image_imports, tmp_path, run_tasks
):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep").write_text("the host's\n")
    upper = layer(
        [
            entry("etc/.wh.secret"),  # removes /etc/secret of the first layer
            entry("opt/.wh..wh..opq"),  # empties /opt of the first layer
            entry("../" * 30 + os.path.relpath(outside, "/") + "/.wh.keep"),  # a whiteout climbing out
        ]
    )
    files = {"/etc/secret": "gone\n", "/etc/kept": "kept\n", "/opt/a": "gone\n"}
    reference = image_with_layers(tmp_path, registry, "whiteouts", files, upper)
    image = run_tasks(owner, reference, username=USER, password=PASSWORD)
    assert (outside / "keep").read_text() == "the host's\n"  # the climbing whiteout stayed inside the image
    assert image.status == ImageStatus.READY, image.status_detail
    root = oci.rootfs_of(image.imported.tag)
    assert not (root / "etc" / "secret").exists() and (root / "etc" / "kept").exists()
    assert not list((root / "opt").iterdir())


def test_the_console_reads_an_images_passwd_and_entrypoint_through_links_inside_the_image_only(
    owner, registry, image_imports, tmp_path, run_tasks
):
    # Given an image whose /etc/passwd and /bin/sh are links to the host's files, absolute and climbing
    upper = layer(
        [
            entry("etc/passwd", tarfile.SYMTYPE, target="/etc/shadow"),
            entry("bin/sh", tarfile.SYMTYPE, target="../../../../../../usr/bin/dash"),
        ]
    )
    reference = image_with_layers(tmp_path, registry, "readlinks", {}, upper)
    image = run_tasks(owner, reference, username=USER, password=PASSWORD)
    assert image.status == ImageStatus.READY, image.status_detail
    root = str(oci.rootfs_of(image.imported.tag))
    # Then they resolve inside the image, where neither exists: no shell, and nothing of the host is read
    assert image.imported.checks["shell"] is False
    assert rootfs.lookup(root, "/etc/passwd") is None
