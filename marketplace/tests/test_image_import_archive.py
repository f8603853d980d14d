"""Importing an image from an archive the user uploaded to their cloud storage (``docker save`` or an OCI layout
tar), made in the test with skopeo from the tests' registry: recognised by content, the owner's files only, and a
file that is no image fails the import with nothing left behind."""

import io
import os
import subprocess
import tarfile

import pytest

from core.errors import ServiceError
from marketplace.choices import ImageStatus
from marketplace.images import imports, oci
from marketplace.models import ImageImport
from marketplace.tests.registry_fixtures import MARKER, PASSWORD, USER
from storage import services as storage_services

pytestmark = pytest.mark.django_db


@pytest.fixture
def run_tasks(django_capture_on_commit_callbacks, eager_tasks):
    def start(*args, **kwargs):
        with django_capture_on_commit_callbacks(execute=True):
            image = imports.start_import(*args, **kwargs)
        image.refresh_from_db()
        return image

    return start


@pytest.fixture
def archives(tiny_image, tmp_path_factory):
    """format → the tiny image saved as that archive (``docker-archive``: what ``docker save`` writes)."""
    folder = tmp_path_factory.mktemp("archives")
    made = {}
    for kind in ("docker-archive", "oci-archive"):
        made[kind] = folder / f"{kind}.tar"
        extra = [f"--additional-tag={tiny_image}"] if kind == "docker-archive" else []
        subprocess.run(
            ["skopeo", "--insecure-policy", "copy", "--quiet", "--src-tls-verify=false", *extra]
            + [f"--src-creds={USER}:{PASSWORD}", f"docker://{tiny_image}", f"{kind}:{made[kind]}"],
            check=True,
        )
    return made


def upload(user, name: str, data: bytes) -> str:
    """Upload ``data`` to ``user``'s cloud storage at /``name`` as the storage page's resumable upload does."""
    created = storage_services.create_upload(user, folder_path="/", filename=name, length=len(data))
    storage_services.write_chunk(user, created.public_id, offset=0, stream=io.BytesIO(data), content_length=len(data))
    return f"/{name}"


@pytest.mark.parametrize("kind", ["docker-archive", "oci-archive"])
def test_an_uploaded_archive_is_imported_as_the_image_it_holds(
    owner, cloud_storage, image_imports, archives, run_tasks, kind
):
    # Given the image saved as an archive and uploaded to the owner's storage under a name that says nothing
    path = upload(owner, "train-image.tar", archives[kind].read_bytes())
    # When the owner imports that path
    image = run_tasks(owner, archive=path)
    # Then it is the image: its files, its command and env
    assert image.status == ImageStatus.READY, image.status_detail
    assert image.name == "train-image"
    record = image.imported
    assert record.archive == path and record.reference == ""
    assert (oci.rootfs_of(record.tag) / "marker").read_text() == MARKER
    assert "GREETING=hello-from-the-image" in record.config["env"]
    assert record.checks["shell"] is True
    assert not list((image_imports / "archives").iterdir())  # the worker's copy of the archive is gone


def test_another_accounts_archive_is_not_found(owner, stranger, cloud_storage, image_imports, archives):
    path = upload(stranger, "theirs.tar", archives["oci-archive"].read_bytes())
    with pytest.raises(ServiceError) as refused:
        imports.start_import(owner, archive=path)
    assert refused.value.status == 404
    assert not ImageImport.objects.exists()


def test_a_file_that_is_no_image_archive_fails_clearly_and_leaves_nothing(
    owner, cloud_storage, image_imports, run_tasks
):
    path = upload(owner, "notes.tar", b"just some notes, not a tar at all\n" * 100)
    image = run_tasks(owner, archive=path)
    assert image.status == ImageStatus.FAILED
    assert "docker save" in image.status_detail
    assert not oci.rootfs_of(image.imported.tag).exists()
    assert not os.listdir(image_imports / "archives")


def test_a_compressed_archive_is_refused_before_anything_unpacks_it(
    owner, cloud_storage, image_imports, archives, run_tasks, monkeypatch
):
    # An OCI archive gzipped, with a member of 64 MiB of zeros beside the image: about a megabyte uploaded, which
    # skopeo would have unpacked whole onto the host's disk.
    packed = io.BytesIO()
    with tarfile.open(archives["oci-archive"]) as source, tarfile.open(fileobj=packed, mode="w:gz") as archive:
        for member in source:
            archive.addfile(member, source.extractfile(member) if member.isfile() else None)
        zeros = tarfile.TarInfo("padding")
        zeros.size = 64 * 2**20
        archive.addfile(zeros, io.BytesIO(bytes(zeros.size)))
    assert len(packed.getvalue()) < 2 * 2**20
    copies = []
    monkeypatch.setattr(oci, "copy_archive", lambda *args: copies.append(args))
    path = upload(owner, "image.tar.gz", packed.getvalue())

    image = run_tasks(owner, archive=path)
    assert image.status == ImageStatus.FAILED
    assert "uncompressed" in image.status_detail
    assert copies == []  # skopeo never saw it
    assert not os.listdir(image_imports / "archives")


def test_an_archive_whose_members_claim_more_than_it_holds_is_not_an_archive(tmp_path):
    path = tmp_path / "sparse.tar"
    with tarfile.open(path, mode="w", format=tarfile.GNU_FORMAT) as archive:
        archive.addfile(tarfile.TarInfo("oci-layout"), io.BytesIO(b""))
        archive.addfile(tarfile.TarInfo("index.json"), io.BytesIO(b""))
    data = bytearray(path.read_bytes())
    assert oci.archive_kind(path) == oci.OCI_ARCHIVE
    # The same headers, the second one claiming a gigabyte the file does not hold.
    header = tarfile.TarInfo("index.json")
    header.size = 2**30
    data[512:1024] = header.tobuf(format=tarfile.GNU_FORMAT)[:512]
    path.write_bytes(bytes(data))
    assert oci.archive_kind(path) == ""


def test_a_broken_archive_fails_with_skopeos_reason_and_leaves_nothing(
    owner, cloud_storage, image_imports, archives, run_tasks
):
    # A docker archive whose manifest names a layer and a config the archive does not hold.
    with tarfile.open(archives["docker-archive"]) as whole:
        manifest = whole.extractfile("manifest.json").read()
    broken = io.BytesIO()
    with tarfile.open(fileobj=broken, mode="w") as archive:
        member = tarfile.TarInfo("manifest.json")
        member.size = len(manifest)
        archive.addfile(member, io.BytesIO(manifest))
    path = upload(owner, "cut.tar", broken.getvalue())
    image = run_tasks(owner, archive=path)
    assert image.status == ImageStatus.FAILED
    assert image.status_detail.startswith("The archive cannot be read as an image")
    assert not oci.rootfs_of(image.imported.tag).exists()
    index = oci.layout() / "index.json"
    assert not index.exists() or image.imported.tag not in index.read_text()


def test_a_reference_and_an_archive_together_are_refused(owner, cloud_storage, image_imports):
    with pytest.raises(ServiceError) as refused:
        imports.start_import(owner, "example.com/team/image:1", archive="/image.tar")
    assert refused.value.code == "invalid_source"


def test_the_import_page_takes_an_archive_path_and_the_image_page_names_it(
    owner, client, cloud_storage, image_imports, archives, eager_tasks, django_capture_on_commit_callbacks
):
    path = upload(owner, "saved.tar", archives["docker-archive"].read_bytes())
    client.force_login(owner)
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post("/marketplace/import/", {"archive": path, "name": "Saved"})
    assert response.status_code == 302
    page = client.get(response["Location"]).content.decode()
    assert 'id="imported-archive"' in page and path in page
    assert ImageImport.objects.get().image.status == ImageStatus.READY


def test_the_api_takes_an_archive_path(owner, owner_api, cloud_storage, image_imports, archives):
    path = upload(owner, "saved.tar", archives["oci-archive"].read_bytes())
    response = owner_api.post("/api/v1/images/import-archive", {"archive": path}, format="json")
    assert response.status_code == 201, response.json()
    assert response.json()["imported"]["archive"] == path
    folder = owner_api.post("/api/v1/images/import-archive", {"archive": "/"}, format="json")
    assert folder.status_code == 409 and folder.json()["code"] == "not_a_file"


def test_an_archive_past_the_sites_largest_import_is_refused_before_it_is_copied(
    owner, settings, cloud_storage, image_imports, archives, run_tasks
):
    path = upload(owner, "big.tar", archives["oci-archive"].read_bytes())
    settings.IMAGE_IMPORT_MAX_GB = 0.0005  # about 500 KB: less than busybox
    image = run_tasks(owner, archive=path)
    assert image.status == ImageStatus.FAILED
    assert "storage is left" in image.status_detail
    assert not (oci.layout() / "blobs").exists()
