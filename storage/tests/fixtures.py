"""Storage fixtures: a private storage root and staging folder per test, and tus helpers for API clients."""

import base64
from types import SimpleNamespace

import pytest

from storage import services
from storage.models import Entry

TUS = {"HTTP_TUS_RESUMABLE": "1.0.0"}
MB = 1024 * 1024


@pytest.fixture
def cloud_storage(settings, tmp_path):
    """File bytes under tmp_path/cloud and staged uploads under tmp_path/staging, so a test can see every byte
    left behind on disk."""
    root, staging = tmp_path / "cloud", tmp_path / "staging"
    settings.STORAGES = settings.STORAGES | {
        "cloudstorage": {"BACKEND": "django.core.files.storage.FileSystemStorage", "OPTIONS": {"location": str(root)}}
    }
    settings.STORAGE_STAGING_DIR = staging

    def files_on_disk():
        # Users' bytes, without the accounts' lock files (``.<account>.lock``, empty) beside their trees.
        found = root.rglob("*") if root.exists() else ()
        return sorted(p for p in found if p.is_file() and not (p.parent == root and p.name.endswith(".lock")))

    def staged():
        return sorted(staging.glob("*")) if staging.exists() else []

    return SimpleNamespace(root=root, staging=staging, files=files_on_disk, staged=staged)


def metadata(**values) -> str:
    return ",".join(f"{k} {base64.b64encode(v.encode()).decode()}" for k, v in values.items())


def tus_create(client, length: int, filename: str, folder: str = "/"):
    return client.post(
        "/api/v1/storage/uploads",
        HTTP_UPLOAD_LENGTH=str(length),
        HTTP_UPLOAD_METADATA=metadata(filename=filename, folder=folder),
        **TUS,
    )


def tus_patch(client, url: str, offset: int, data: bytes):
    return client.generic(
        "PATCH",
        url,
        data=data,
        content_type="application/offset+octet-stream",
        HTTP_UPLOAD_OFFSET=str(offset),
        **TUS,
    )


def tus_upload(client, data: bytes, filename: str, folder: str = "/", chunk: int = MB):
    """Upload ``data`` in chunks; returns the last PATCH response (or the creation response if empty)."""
    created = tus_create(client, len(data), filename, folder)
    assert created.status_code == 201, created.content
    url, offset, response = created["Location"], 0, created
    while offset < len(data):
        response = tus_patch(client, url, offset, data[offset : offset + chunk])
        assert response.status_code == 204, response.content
        offset = int(response["Upload-Offset"])
    return response


def store_file(user, path: str, data: bytes = b"hello") -> Entry:
    """A finished file at ``path`` through the real upload service (folders created as needed)."""
    folder_path, _sep, name = path.rpartition("/")
    services.make_folders(user, folder_path or "/")
    upload = services.create_upload(user, folder_path=folder_path or "/", filename=name, length=len(data))
    if data:
        upload = services.write_chunk(user, upload.public_id, offset=0, stream=_Stream(data), content_length=len(data))
    upload.refresh_from_db()
    return upload.entry


class _Stream:
    def __init__(self, data: bytes):
        self.data, self.pos = data, 0

    def read(self, n: int) -> bytes:
        piece = self.data[self.pos : self.pos + n]
        self.pos += len(piece)
        return piece
