"""Files stored before cloud storage was a tree (bytes under an opaque ``<owner>/<entry>`` key) move to their paths
when ``migrate`` runs, every one of them with its bytes; and the tree, not the index, is what the API shows."""

import hashlib
import uuid

import pytest
from django.apps import apps

from core.errors import ServiceError
from storage import services, tree
from storage.models import Entry
from storage.tests.fixtures import _Stream, store_file

BEFORE = [("storage", "0006_stored_elsewhere")]
AFTER = [("storage", "0007_files_at_their_paths")]


def _old_file(user, root, path, data: bytes, folders: dict) -> Entry:
    """A file as the earlier layout kept it: its row with an opaque key, its bytes under that key."""
    public_id = uuid.uuid4()
    key = f"{user.public_id}/{public_id}"
    (root / key).parent.mkdir(parents=True, exist_ok=True)
    (root / key).write_bytes(data)
    head, _sep, name = path.rpartition("/")
    checksum = hashlib.sha256(data).hexdigest()
    fields = {"kind": "file", "name": name, "path": path, "size": len(data), "checksum": checksum, "storage_key": key}
    return Entry.objects.create(public_id=public_id, owner=user, parent=folders.get(head), **fields)


def _old_folder(user, path, folders: dict) -> Entry:
    head, _sep, name = path.rpartition("/")
    folders[path] = Entry.objects.create(owner=user, parent=folders.get(head), kind="folder", name=name, path=path)
    return folders[path]


@pytest.mark.django_db(transaction=True)
def test_migrate_moves_every_stored_file_to_its_path_with_its_bytes(
    migrator, owner, stranger, owner_api, cloud_storage
):
    migrator.to(BEFORE)
    root = cloud_storage.root
    kept = {}
    for user in (owner, stranger):
        folders = {}
        for path in ("/datasets", "/datasets/原始数据", "/empty"):
            _old_folder(user, path, folders)
        files = {
            "/readme.md": b"# hello\n",
            "/datasets/train.csv": b"a,b\n1,2\n" * 1000,
            "/datasets/原始数据/图 1.png": bytes(range(256)) * 40,
            "/datasets/zero.bin": b"",
        }
        for path, data in files.items():
            kept[(user.pk, path)] = (_old_file(user, root, path, data, folders).public_id, data)
    lost = _old_file(owner, root, "/lost.bin", b"gone", {})
    (root / lost.storage_key).unlink()  # bytes already missing before: left as they were, not invented

    migrator.to(AFTER)

    for (_user_pk, path), (public_id, data) in kept.items():
        entry = Entry.objects.get(public_id=public_id)
        assert entry.storage_key == "" and entry.path == path
        assert (root / str(entry.owner.public_id) / path.lstrip("/")).read_bytes() == data
    assert (root / str(owner.public_id) / "empty").is_dir()
    assert Entry.objects.get(pk=lost.pk).storage_key == lost.storage_key
    opaque = [p for p in root.rglob("*") if p.is_file() and _is_uuid(p.name)]
    assert opaque == []

    # The API lists and serves the same files as before, byte for byte.
    response = owner_api.get("/api/v1/storage/entries", {"path": "/datasets"})
    assert sorted(e["name"] for e in response.json()["results"]) == ["train.csv", "zero.bin", "原始数据"]
    public_id, data = kept[(owner.pk, "/datasets/原始数据/图 1.png")]
    download = owner_api.get(f"/api/v1/storage/entries/{public_id}/download")
    assert download.status_code == 200 and b"".join(download.streaming_content) == data

    # Run again (an interrupted migration resumed): nothing moves, nothing is lost.

    assert tree.migrate_layout(apps.get_model("storage", "Entry"), apps.get_model("console", "User")) == 0
    assert Entry.objects.filter(storage_key="").count() == len(kept) + 2 * 3


def _is_uuid(name: str) -> bool:
    try:
        uuid.UUID(name)
    except ValueError:
        return False
    return True


def test_a_file_made_in_the_tree_is_listed_and_one_removed_from_it_is_not(owner, cloud_storage):
    store_file(owner, "/a.txt", b"a")
    folder = cloud_storage.root / str(owner.public_id)
    (folder / "made").mkdir()
    (folder / "made" / "b.bin").write_bytes(b"bb")
    (folder / "a.txt").unlink()
    (folder / "link").symlink_to("/etc")  # a link leads nowhere: not listed, never followed
    services.children(owner, None)  # a listing: the index is read from the tree
    listed = {e.path: e.size for e in Entry.objects.filter(owner=owner)}
    assert listed == {"/made": 0, "/made/b.bin": 2}
    assert services.usage_bytes(owner) == 2


def test_a_link_planted_in_the_tree_never_leads_the_console_outside_it(owner, cloud_storage, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    services.make_folders(owner, "/data")
    upload = services.create_upload(owner, folder_path="/data", filename="x.bin", length=3)
    # A machine replaces the folder by a link to somewhere else on the host.
    folder = cloud_storage.root / str(owner.public_id)
    (folder / "data").rmdir()
    (folder / "data").symlink_to(outside)
    with pytest.raises(ServiceError):
        services.write_chunk(owner, upload.public_id, offset=0, stream=_Stream(b"abc"), content_length=3)
    with pytest.raises(ServiceError):
        services.make_folders(owner, "/data/sub")
    # Even a change that raced the refresh (the row still there) never follows the link.
    staged = tmp_path / "staged"
    staged.write_bytes(b"abc")
    for change in (
        lambda: tree.place(owner, "/data/x.bin", staged),
        lambda: tree.make_folder(owner, "/data/sub"),
        lambda: tree.rename(owner, "/data/x", "/y"),
        lambda: tree.open_file(owner, "/data"),
    ):
        with pytest.raises(OSError):
            change()
    tree.remove(owner, "/data/x")
    assert list(outside.iterdir()) == []
    assert not Entry.objects.filter(owner=owner, path__startswith="/data").exists()
