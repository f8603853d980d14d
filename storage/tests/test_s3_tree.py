"""Cloud storage on S3 is one set of files: each account's prefix of the bucket, mounted on the host with rclone, is
what the storage API lists and serves and what every machine of the account has at ``/root/shared``.

What the owner notices: a file uploaded on the storage page is an object at its path in the bucket and is read
inside a machine; a file written inside is listed by the API, counted in the usage and lands in the bucket; a
folder made, renamed or deleted in the console is the same in the bucket (an empty one stays); what another host
put in the bucket is listed.
"""

import hashlib
import io
import time

import pytest
from django.contrib.auth import get_user_model

from storage import quota, services
from storage.choices import EntryKind
from storage.models import Entry
from storage.tests.fixtures import tus_create, tus_patch, tus_upload
from storage.tree import migrate_layout

pytestmark = [pytest.mark.sandbox]

MB = 1024 * 1024


def names(user, folder=None):
    return {e.name: e.size for e in services.children(user, folder)}


def eventually(check, timeout=15.0):
    deadline = time.monotonic() + timeout
    while True:
        try:
            result = check()
        except AssertionError:
            if time.monotonic() > deadline:
                raise
        else:
            if result is not False:
                return result
            if time.monotonic() > deadline:
                raise AssertionError("never became true")
        time.sleep(0.2)


def upload(user, folder_path, filename, data: bytes):
    made = services.create_upload(user, folder_path=folder_path, filename=filename, length=len(data))
    return services.write_chunk(user, made.public_id, offset=0, stream=io.BytesIO(data), content_length=len(data))


@pytest.mark.django_db
def test_the_console_writes_the_bucket_at_the_files_paths(s3_storage, owner):
    prefix = f"cloudstorage/{owner.public_id}"
    docs = services.create_folder(owner, None, "docs")
    services.create_folder(owner, docs, "empty")
    upload(owner, "/docs", "a.txt", b"hello bucket\n")
    s3_storage.settled(owner)

    assert s3_storage.read(f"{prefix}/docs/a.txt") == b"hello bucket\n"
    assert f"{prefix}/docs/empty/" in s3_storage.keys()  # an empty folder stays: S3 has none of its own
    assert names(owner, docs) == {"empty": 0, "a.txt": 13}
    entry = services.find(owner, "/docs/a.txt")
    assert entry.storage_key == ""
    _, handle = services.open_file(owner, entry.public_id)
    assert handle.read() == b"hello bucket\n"

    # Renamed: the files and the folders' markers are under the new name, nothing under the old.
    services.rename(owner, docs.public_id, "papers")
    s3_storage.settled(owner)
    keys = s3_storage.keys()
    assert f"{prefix}/papers/a.txt" in keys and f"{prefix}/papers/empty/" in keys
    assert not [k for k in keys if k.startswith(f"{prefix}/docs/")], keys
    time.sleep(2.5)  # past the mount's listing cache: the bucket, not the mount's memory, says so
    assert names(owner) == {"papers": 0}
    assert names(owner, services.find(owner, "/papers")) == {"empty": 0, "a.txt": 13}

    # Deleted: nothing left in the bucket, nothing listed.
    services.delete(owner, services.find(owner, "/papers").public_id)
    s3_storage.settled(owner)
    assert s3_storage.keys(f"{prefix}/") == {}
    time.sleep(2.5)
    assert names(owner) == {}


@pytest.mark.django_db
def test_what_lands_in_the_bucket_from_elsewhere_is_listed_and_counted(s3_storage, owner, stranger):
    s3_storage.put(f"cloudstorage/{owner.public_id}/from-cli/weights.bin", b"w" * 4096)
    assert names(owner) == {"from-cli": 0}
    assert names(owner, services.find(owner, "/from-cli")) == {"weights.bin": 4096}
    assert quota.usage_bytes(owner) == 4096
    assert names(stranger) == {} and quota.usage_bytes(stranger) == 0  # another account's prefix is its own


@pytest.mark.django_db
def test_the_daily_usage_snapshot_reads_every_mounted_account(s3_storage, owner):
    assert names(owner) == {}  # mounted on this host by a first look
    s3_storage.put(f"cloudstorage/{owner.public_id}/late.bin", b"l" * 2048)
    snapshot = quota.usage_snapshot()
    assert Entry.objects.filter(owner=owner, path="/late.bin", size=2048).exists()
    assert [(row.user_id, row.used_bytes) for row in snapshot] == [(owner.pk, 2048)]


@pytest.mark.django_db(transaction=True)
def test_a_machine_and_the_api_share_the_bucket(on_local, s3_storage, running, owner, owner_api):
    prefix = f"cloudstorage/{owner.public_id}"
    assert tus_upload(owner_api, b"uploaded on the page\n", "notes.txt", "/").status_code == 204
    instance = running()
    assert on_local.run(instance, "cat /root/shared/notes.txt").stdout == "uploaded on the page\n"

    # Written inside: the API lists it and counts it, and it lands in the bucket at its path.
    done = on_local.run(instance, "mkdir -p /root/shared/out && head -c 3145728 /dev/urandom > /root/shared/out/x.bin")
    assert done.returncode == 0, done.stderr
    listed = owner_api.get("/api/v1/storage/entries", {"path": "/out"}).json()["results"]
    assert [(e["name"], e["size"]) for e in listed] == [("x.bin", 3 * MB)]
    assert owner_api.get("/api/v1/storage/usage").json()["used"] == 3 * MB + len(b"uploaded on the page\n")
    inside = on_local.run(instance, "sha256sum < /root/shared/out/x.bin").stdout.split()[0]
    eventually(lambda: s3_storage.keys().get(f"{prefix}/out/x.bin") == 3 * MB)
    assert hashlib.sha256(s3_storage.read(f"{prefix}/out/x.bin")).hexdigest() == inside

    # Deleted in the console while the machine runs: gone inside and from the bucket.
    out = services.find(owner, "/out")
    assert owner_api.delete(f"/api/v1/storage/entries/{out.public_id}").status_code == 204
    assert on_local.run(instance, "ls /root/shared").stdout.split() == ["notes.txt"]
    eventually(lambda: not [k for k in s3_storage.keys() if k.startswith(f"{prefix}/out/")])


@pytest.mark.django_db
def test_files_kept_under_opaque_keys_move_to_their_paths(s3_storage, owner):
    folder = Entry.objects.create(owner=owner, kind=EntryKind.FOLDER, name="data", path="/data")
    empty = Entry.objects.create(owner=owner, kind=EntryKind.FOLDER, name="empty", path="/empty")
    kept = Entry.objects.create(
        owner=owner, parent=folder, kind=EntryKind.FILE, name="a.csv", path="/data/a.csv", size=6
    )
    kept.storage_key = f"{owner.public_id}/{kept.public_id}"
    kept.save()
    s3_storage.client.put_object(Bucket=s3_storage.name, Key=f"cloudstorage/{kept.storage_key}", Body=b"1,2,3\n")

    assert migrate_layout(Entry, get_user_model(), write=lambda line: None) == 1
    assert migrate_layout(Entry, get_user_model(), write=lambda line: None) == 0  # again: nothing left to move
    prefix = f"cloudstorage/{owner.public_id}"
    assert s3_storage.keys() == {f"{prefix}/data/": 0, f"{prefix}/data/a.csv": 6, f"{prefix}/empty/": 0}
    kept.refresh_from_db()
    assert kept.storage_key == "" and Entry.objects.filter(pk=empty.pk).exists()
    assert names(owner) == {"data": 0, "empty": 0}
    _, handle = services.open_file(owner, kept.public_id)
    assert handle.read() == b"1,2,3\n"


@pytest.mark.django_db
def test_a_file_larger_than_the_mounts_cache_is_refused_clearly_and_leaves_nothing(
    s3_storage, owner, owner_api, settings
):
    settings.STORAGE_S3_CACHE_GB = 0.05  # 50 MiB of writes in flight
    created = tus_create(owner_api, 80 * MB, "big.bin")
    response = tus_patch(owner_api, created["Location"], 0, b"z" * (80 * MB))
    assert response.status_code == 503, response.content
    assert response.json()["message"] == "您的云存储暂时无法保存此文件，请稍后再试。"  # in the page's language
    s3_storage.settled(owner)
    assert s3_storage.keys() == {} and names(owner) == {} and quota.usage_bytes(owner) == 0
    # A file that fits goes through as before.
    assert tus_upload(owner_api, b"small\n", "small.txt").status_code == 204
    assert names(owner) == {"small.txt": 6}
