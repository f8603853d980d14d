"""Storage fixtures: a private storage root and staging folder per test, and tus helpers for API clients."""

import base64
import importlib.util
import os
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path
from types import SimpleNamespace

import boto3
import pytest

from storage import s3mount, services
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


# Cloud storage on S3, mounted with rclone ----------------------------------------------------------------------------


def _s3_unavailable() -> str:
    if os.geteuid() != 0:
        return "mounting with FUSE as the console does needs root"
    if importlib.util.find_spec("moto") is None:
        return "moto (the S3 server the tests run against) is not installed"
    return s3mount.available()


@pytest.fixture(scope="session")
def s3_server():
    """A local S3 server (moto's, on 127.0.0.1) for the whole session: its endpoint."""
    why = _s3_unavailable()
    if why:
        pytest.skip(f"no S3 mount here: {why}")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    endpoint = f"http://127.0.0.1:{port}"
    for _ in range(100):
        try:
            urllib.request.urlopen(endpoint + "/moto-api/", timeout=1)  # noqa: S310  (the local test server)
            break
        except OSError:
            time.sleep(0.1)
    yield endpoint
    server.terminate()
    server.wait(timeout=10)


@pytest.fixture
def s3_storage(request, settings, s3_server, tmp_path):
    """``STORAGE=s3`` against a bucket of this test's own, each account's prefix mounted with rclone under the
    sandbox root of ``on_local`` when the test has one (else under tmp_path); every mount ended after the test.
    Returns the bucket: ``keys()`` lists it, ``read(key)`` reads an object."""
    bucket = f"test-{uuid.uuid4().hex[:12]}"
    client = boto3.client(
        "s3", endpoint_url=s3_server, aws_access_key_id="test", aws_secret_access_key="test", region_name="us-east-1"
    )
    client.create_bucket(Bucket=bucket)
    base = Path(settings.LOCAL_SANDBOX_ROOT) if "on_local" in request.fixturenames else tmp_path
    options = {
        "bucket_name": bucket,
        "endpoint_url": s3_server,
        "region_name": "us-east-1",
        "access_key": "test",
        "secret_key": "test",
        "location": "cloudstorage",
        "default_acl": "private",
        "querystring_auth": True,
        "file_overwrite": False,
    }
    settings.STORAGE = "s3"
    settings.STORAGES = settings.STORAGES | {
        "cloudstorage": {"BACKEND": "storages.backends.s3.S3Storage", "OPTIONS": options}
    }
    settings.STORAGE_S3_MOUNT_ROOT = str(base / "cloud")
    settings.STORAGE_S3_CACHE_GB = 0.25
    settings.STORAGE_S3_WRITE_BACK_SECONDS = 1
    settings.STORAGE_S3_DIR_CACHE_SECONDS = 2
    settings.STORAGE_STAGING_DIR = tmp_path / "staging"

    def keys(prefix="cloudstorage/"):
        listed = client.list_objects_v2(Bucket=bucket, Prefix=prefix).get("Contents", [])
        return {item["Key"]: item["Size"] for item in listed}

    def read(key):
        return client.get_object(Bucket=bucket, Key=key)["Body"].read()

    def settled(account):
        assert s3mount.settle(Path(settings.STORAGE_S3_MOUNT_ROOT) / str(account.public_id))

    def put(key, body):
        client.put_object(Bucket=bucket, Key=key, Body=body)
        time.sleep(settings.STORAGE_S3_DIR_CACHE_SECONDS + 0.5)  # what another host wrote shows after the cache

    yield SimpleNamespace(name=bucket, keys=keys, read=read, settled=settled, put=put, client=client)
    s3mount.unmount_all(Path(settings.STORAGE_S3_MOUNT_ROOT))
