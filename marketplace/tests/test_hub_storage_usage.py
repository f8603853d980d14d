"""Published repositories are part of their owner's storage: the usage bar, the storage API, the ceiling that
cloud-storage uploads meet, and the GB-day billing snapshot all count them; and an LFS upload address stops
working once the token that asked for it is revoked."""

import base64
import hashlib
import importlib
import json
from datetime import timedelta

import pytest
import time_machine
from django.apps import apps
from django.test import Client
from django.utils import timezone

from accounts import services as console_services
from accounts import tokens
from accounts.models import ApiToken
from marketplace import tasks
from marketplace.hub import repos
from marketplace.models import HubBlob
from storage import quota, services
from storage.models import Entry, StoredElsewhere
from tests.fixtures.factories import UserFactory

pytestmark = pytest.mark.django_db


def _client(token=None) -> Client:
    headers = {"HTTP_ACCEPT_LANGUAGE": "en"}
    if token:
        headers["HTTP_AUTHORIZATION"] = f"Bearer {token}"
    return Client(**headers)


def _commit(token, path: str, content: bytes):
    body = b"\n".join(
        json.dumps(line).encode()
        for line in (
            {"key": "header", "value": {"summary": f"add {path}"}},
            {
                "key": "file",
                "value": {"path": path, "content": base64.b64encode(content).decode(), "encoding": "base64"},
            },
        )
    )
    answer = _client(token).post("/api/models/demo/tiny/commit/main", body, content_type="application/x-ndjson")
    assert answer.status_code == 200, answer.content
    return answer


@pytest.fixture
def publisher(cloud_storage):
    owner = UserFactory()
    repos.create_repo(owner, name="tiny", organization="demo", private=False, kind="model")
    token = console_services.create_api_token(owner, name="hf", scope="read_write").plaintext
    return owner, token


def test_the_storage_page_and_api_count_what_the_owner_published(publisher):
    owner, token = publisher
    Entry.objects.create(
        owner=owner, kind="file", name="a.bin", path="/a.bin", size=5000, storage_key=f"{owner.public_id}/a"
    )  # kept under a key (the earlier layout): no bytes in the tree
    _commit(token, "weights.bin", b"w" * 12_000)
    _commit(token, "weights.bin", b"v" * 12_000)  # the older revision stays downloadable: it still counts

    page = Client()
    page.force_login(owner)
    page.cookies["django_language"] = "en"
    html = page.get("/storage/").content.decode()
    assert "28.3\xa0KB of" in html  # 5,000 + 2 × 12,000 bytes
    assert "Including 23.4\xa0KB in your published hub repositories" in html

    api = _client(console_services.create_api_token(owner, name="r", scope="read").plaintext)
    usage = api.get("/api/v1/storage/usage").json()
    assert (usage["used"], usage["elsewhere"]) == (29_000, 24_000)

    stranger = Client()
    stranger.force_login(UserFactory())
    assert "published hub repositories" not in stranger.get("/storage/").content.decode()


def test_the_billing_snapshot_reads_published_bytes_beside_files(publisher, settings):
    owner, token = publisher
    settings.STORAGE_FREE_GB = 10_000 / quota.GB
    Entry.objects.create(
        owner=owner, kind="file", name="a.bin", path="/a.bin", size=4000, storage_key=f"{owner.public_id}/a"
    )  # kept under a key (the earlier layout): no bytes in the tree
    _commit(token, "weights.bin", b"w" * 12_000)
    row = next(r for r in quota.usage_snapshot() if r.user_id == owner.pk)
    assert (row.used_bytes, row.billable_bytes) == (16_000, 6_000)

    publisher_only = UserFactory()  # someone who stores nothing but a repository is billed for it too
    repos.create_repo(publisher_only, name="solo", organization="solo", private=True, kind="model")
    solo = console_services.create_api_token(publisher_only, name="hf", scope="read_write").plaintext
    body = b"\n".join(
        json.dumps(line).encode()
        for line in (
            {"key": "header", "value": {"summary": "x"}},
            {
                "key": "file",
                "value": {"path": "x.bin", "content": base64.b64encode(b"x" * 11_000).decode(), "encoding": "base64"},
            },
        )
    )
    assert _client(solo).post("/api/models/solo/solo/commit/main", body, content_type="x").status_code == 200
    row = next(r for r in quota.usage_snapshot() if r.user_id == publisher_only.pk)
    assert (row.used_bytes, row.billable_bytes) == (11_000, 1_000)


def test_a_cloud_storage_upload_meets_the_ceiling_the_hub_filled(publisher, settings):
    owner, token = publisher
    settings.STORAGE_MAX_GB = 20_000 / quota.GB
    _commit(token, "weights.bin", b"w" * 15_000)
    with pytest.raises(quota.QuotaExceeded):
        services.create_upload(owner, folder_path="/", filename="more.bin", length=8000)
    assert services.create_upload(owner, folder_path="/", filename="fits.bin", length=4000).length == 4000


def _lfs_address(token, data: bytes) -> str:
    oid = hashlib.sha256(data).hexdigest()
    batch = _client(token).post(
        "/demo/tiny.git/info/lfs/objects/batch",
        {"operation": "upload", "objects": [{"oid": oid, "size": len(data)}]},
        content_type="application/json",
    )
    assert batch.status_code == 200, batch.content
    return batch.json()["objects"][0]["actions"]["upload"]["href"].split("testserver", 1)[1]


def test_an_upload_address_stops_working_when_its_token_is_revoked(publisher, settings):
    owner, token = publisher
    settings.HUB_LFS_THRESHOLD_BYTES = 1000
    data = b"L" * 5000
    address = _lfs_address(token, data)
    tokens.revoke_api_token(owner, ApiToken.objects.get(user=owner).public_id)
    refused = _client().put(address, data, content_type="application/octet-stream")
    assert refused.status_code == 403 and "invalid or has expired" in refused.json()["error"]
    assert not HubBlob.objects.filter(sha256=hashlib.sha256(data).hexdigest()).exists()

    fresh = console_services.create_api_token(owner, name="again", scope="read_write").plaintext
    assert Client().put(_lfs_address(fresh, data), data, content_type="application/octet-stream").status_code == 200


def test_uploaded_but_never_committed_bytes_count_until_the_sweep_removes_them(publisher, settings, hub_storage):
    owner, token = publisher
    settings.HUB_LFS_THRESHOLD_BYTES = 1000
    data = b"P" * 7000
    assert Client().put(_lfs_address(token, data), data, content_type="application/octet-stream").status_code == 200
    assert quota.usage(owner).elsewhere == 7000
    with time_machine.travel(timezone.now() + timedelta(days=3)):
        tasks.sweep_hub_blobs()
    assert quota.usage(owner).elsewhere == 0


def test_repositories_published_before_the_upgrade_are_recorded_by_the_migration(publisher):

    owner, token = publisher
    _commit(token, "weights.bin", b"w" * 9_000)
    StoredElsewhere.objects.all().delete()  # as before the upgrade
    assert quota.usage(owner).elsewhere == 0
    importlib.import_module("marketplace.migrations.0009_hub_bytes_in_storage").record(apps, None)
    assert quota.usage(owner).elsewhere == 9_000 == repos.hub_bytes(owner)
