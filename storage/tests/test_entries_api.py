"""Folders and files through /api/v1/storage: list, create, rename, move, delete, download, usage."""

import os
import warnings
from urllib.parse import quote

import pytest
from asgiref.sync import async_to_sync
from django.test import AsyncClient

from accounts.services import create_api_token
from storage import paths, quota, services
from storage.models import Entry

from .fixtures import MB, store_file

pytestmark = pytest.mark.django_db


def test_a_folder_lists_folders_first_then_files_by_name(owner_api, owner):
    store_file(owner, "/data/b.txt")
    store_file(owner, "/data/a.txt")
    services.make_folders(owner, "/data/zeta")

    body = owner_api.get("/api/v1/storage/entries", {"path": "/data"}).json()

    assert [(e["kind"], e["name"]) for e in body["results"]] == [
        ("folder", "zeta"),
        ("file", "a.txt"),
        ("file", "b.txt"),
    ]
    assert body["results"][1]["download_url"].endswith("/download")


def test_creating_a_folder_creates_missing_parents_and_refuses_duplicates(owner_api, owner):
    response = owner_api.post("/api/v1/storage/folders", {"path": "/projects/训练 数据"}, format="json")
    assert response.status_code == 201 and response.json()["path"] == "/projects/训练 数据"
    assert Entry.objects.filter(owner=owner, path="/projects", kind="folder").exists()

    again = owner_api.post("/api/v1/storage/folders", {"path": "/projects/训练 数据"}, format="json")
    assert again.status_code == 409 and again.json()["code"] == "exists"


@pytest.mark.parametrize("path", ["../up", "/a/../../etc", "/a//b", "a\\b", "/bad\x07name", ""])
def test_odd_folder_paths_are_refused_with_a_message(owner_api, path):
    response = owner_api.post("/api/v1/storage/folders", {"path": path}, format="json")
    assert response.status_code == 400 and response.json()["message"]
    assert not Entry.objects.exists()


def test_the_root_folder_always_exists(owner_api):
    response = owner_api.post("/api/v1/storage/folders", {"path": "/"}, format="json")
    assert response.status_code == 409 and response.json()["code"] == "exists"
    assert not Entry.objects.exists()


def test_renaming_a_folder_moves_everything_inside_it(owner_api, owner):
    store_file(owner, "/old/deep/file.txt")
    folder = Entry.objects.get(owner=owner, path="/old")

    response = owner_api.patch(f"/api/v1/storage/entries/{folder.public_id}", {"name": "新"}, format="json")

    assert response.status_code == 200 and response.json()["path"] == "/新"
    assert set(Entry.objects.filter(owner=owner).values_list("path", flat=True)) == {
        "/新",
        "/新/deep",
        "/新/deep/file.txt",
    }


def test_a_similar_looking_folder_is_not_dragged_along_by_a_rename(owner_api, owner):
    # "/Data" and "/data2" must not be mistaken for the contents of "/data" (SQLite's LIKE ignores case).
    store_file(owner, "/data/x.txt")
    store_file(owner, "/Data/y.txt")
    store_file(owner, "/data2/z.txt")
    folder = Entry.objects.get(owner=owner, path="/data")

    services.rename(owner, folder.public_id, "moved")

    paths_now = set(Entry.objects.filter(owner=owner, kind="file").values_list("path", flat=True))
    assert paths_now == {"/moved/x.txt", "/Data/y.txt", "/data2/z.txt"}


def test_moving_a_file_into_another_folder(owner_api, owner):
    entry = store_file(owner, "/inbox/report.pdf")
    services.make_folders(owner, "/archive/2026")

    response = owner_api.patch(f"/api/v1/storage/entries/{entry.public_id}", {"folder": "/archive/2026"}, format="json")

    assert response.status_code == 200 and response.json()["path"] == "/archive/2026/report.pdf"
    assert owner_api.get("/api/v1/storage/entries", {"path": "/inbox"}).json()["results"] == []


def test_a_folder_cannot_be_moved_into_itself(owner_api, owner):
    services.make_folders(owner, "/a/b")
    folder = Entry.objects.get(owner=owner, path="/a")
    response = owner_api.patch(f"/api/v1/storage/entries/{folder.public_id}", {"folder": "/a/b"}, format="json")
    assert response.status_code == 400 and response.json()["code"] == "into_itself"


def test_a_rename_onto_an_existing_name_is_refused(owner_api, owner):
    store_file(owner, "/a.txt")
    b = store_file(owner, "/b.txt")
    response = owner_api.patch(f"/api/v1/storage/entries/{b.public_id}", {"name": "a.txt"}, format="json")
    assert response.status_code == 409 and response.json()["code"] == "exists"
    assert Entry.objects.get(pk=b.pk).name == "b.txt"


@pytest.mark.parametrize("name", ["../x", "/abs", "a/b", "..", "", "tab\there", "\u202etxt.exe"])
def test_a_rename_to_an_odd_name_is_refused(owner_api, owner, name):
    entry = store_file(owner, "/a.txt")
    response = owner_api.patch(f"/api/v1/storage/entries/{entry.public_id}", {"name": name}, format="json")
    assert response.status_code == 400 and response.json()["code"] == "invalid_path"
    assert Entry.objects.get(pk=entry.pk).path == "/a.txt"


def test_deleting_a_folder_deletes_its_files_and_their_bytes(
    owner_api, owner, cloud_storage, django_capture_on_commit_callbacks
):
    store_file(owner, "/tmp/a.bin", b"a" * 1000)
    store_file(owner, "/tmp/sub/b.bin", b"b" * 1000)
    store_file(owner, "/keep.bin", b"k")
    services.create_upload(owner, folder_path="/tmp/sub", filename="pending.bin", length=10)
    folder = Entry.objects.get(owner=owner, path="/tmp")
    assert len(cloud_storage.files()) == 3

    with django_capture_on_commit_callbacks(execute=True):
        response = owner_api.delete(f"/api/v1/storage/entries/{folder.public_id}")

    assert response.status_code == 204
    assert list(Entry.objects.filter(owner=owner).values_list("path", flat=True)) == ["/keep.bin"]
    assert [p.read_bytes() for p in cloud_storage.files()] == [b"k"]
    assert cloud_storage.staged() == []


def test_a_download_streams_the_bytes_with_a_safe_chinese_file_name(owner_api, owner):
    data = b"\x00\x01" * 1000
    entry = store_file(owner, "/模型 权重.bin", data)

    response = owner_api.get(f"/api/v1/storage/entries/{entry.public_id}/download")

    assert response.status_code == 200 and b"".join(response.streaming_content) == data
    assert response["Content-Length"] == str(len(data))
    assert response["Content-Disposition"] == f"attachment; filename*=utf-8''{quote('模型 权重.bin')}"


def test_under_asgi_a_download_is_sent_as_read_and_a_head_reads_no_file(owner):
    data = os.urandom(3 * 1024 * 1024 + 5)
    entry = store_file(owner, "/weights.bin", data)
    token = create_api_token(owner, name="asgi", scope="read").plaintext
    url = f"/api/v1/storage/entries/{entry.public_id}/download/"

    @async_to_sync
    async def fetch(method):
        response = await getattr(AsyncClient(), method)(url, headers={"Authorization": f"Bearer {token}"})
        body = b"".join([chunk async for chunk in response.streaming_content]) if response.streaming else b""
        return response, body

    with warnings.catch_warnings():
        # Django warns when it reads a synchronous body whole into memory under ASGI
        warnings.filterwarnings("error", message=".*synchronous iterators")
        got, body = fetch("get")
    assert got.status_code == 200 and got.is_async and body == data
    assert got["Content-Length"] == str(len(data))
    assert got["Content-Disposition"] == 'attachment; filename="weights.bin"'
    head, body = fetch("head")
    assert head.status_code == 200 and body == b"" and not head.streaming
    assert head["Content-Length"] == str(len(data)) and head["Content-Disposition"] == got["Content-Disposition"]


def test_a_folder_cannot_be_downloaded(owner_api, owner):
    folder = services.make_folders(owner, "/f")
    response = owner_api.get(f"/api/v1/storage/entries/{folder.public_id}/download")
    assert response.status_code == 400 and response.json()["code"] == "is_a_folder"


def test_lookup_finds_an_entry_by_path(owner_api, owner):
    store_file(owner, "/a/b.txt", b"12345")
    assert owner_api.get("/api/v1/storage/entries/lookup", {"path": "/a/b.txt"}).json()["size"] == 5
    assert owner_api.get("/api/v1/storage/entries/lookup", {"path": "/"}).json()["kind"] == "folder"
    assert owner_api.get("/api/v1/storage/entries/lookup", {"path": "/nope"}).status_code == 404


def test_usage_counts_stored_and_reserved_bytes_against_the_free_tier_and_ceiling(
    owner_api, owner_has_topped_up, owner, settings
):
    settings.STORAGE_FREE_GB = 1 / 1024  # 1 MB free
    store_file(owner, "/big.bin", b"x" * (MB + 100))
    services.create_upload(owner, folder_path="/", filename="later.bin", length=500)

    body = owner_api.get("/api/v1/storage/usage").json()

    assert body["used"] == MB + 100 and body["reserved"] == 500 and body["free"] == MB
    assert body["billable"] == 100 and body["maximum"] == int(settings.STORAGE_MAX_GB * quota.GB)


def test_billing_reads_every_users_usage_in_one_snapshot(
    owner_has_topped_up, owner, stranger, settings, django_assert_num_queries
):
    settings.STORAGE_FREE_GB = 1 / 1024
    store_file(owner, "/a.bin", b"x" * (MB + 1))
    store_file(stranger, "/b.bin", b"y" * 10)
    quota.usage_snapshot()  # the trees read once: an unchanged tree is not read into the index again

    with django_assert_num_queries(1):
        snapshot = {row.user_id: row for row in quota.usage_snapshot()}

    assert snapshot[owner.pk].used_bytes == MB + 1 and snapshot[owner.pk].billable_bytes == 1
    assert snapshot[stranger.pk].billable_bytes == 0
    assert services.usage_bytes(owner) == MB + 1


def test_names_keep_one_unicode_form():
    decomposed = "cafe\u0301.txt"
    assert paths.clean_name(decomposed) == "caf\u00e9.txt"


@pytest.mark.parametrize(
    ("name", "numbered"),
    [
        ("report.pdf", "report (1).pdf"),
        ("data.tar.gz", "data (1).tar.gz"),
        (".env", ".env (1)"),
        ("README", "README (1)"),
    ],
)
def test_a_taken_name_is_numbered_before_its_extension(name, numbered):
    assert paths.numbered(name, 1) == numbered


def test_overlong_paths_and_deep_nesting_are_refused():
    with pytest.raises(paths.InvalidPath):
        paths.clean_path("/" + "/".join(["d"] * 33))
    with pytest.raises(paths.InvalidPath):
        paths.clean_path("/" + "/".join(["中" * 80] * 9))
    assert paths.clean_path("/a b/中文 名/") == "/a b/中文 名"
