"""The data folder is the console's user's alone: new files by the process's umask, older trees by migrate."""

import os
import stat
from pathlib import Path

import pytest
from django.core.management import call_command

from accounts import data_dir


def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


@pytest.fixture
def old_tree(settings, tmp_path):
    """A data folder as an older console left it: folders 0755, files 0644, with a sandbox root inside."""
    data = tmp_path / "var"
    media = data / "media"
    sandboxes = data / "sandboxes"
    instance = sandboxes / "instances" / "abc"
    paths = {
        "database": data / "db.sqlite3",
        "broker message": data / "broker" / "queue" / "message.msg",
        "stored file": media / "cloudstorage" / "u1" / "file.txt",
        "invoice": media / "cloudstorage" / "invoices" / "fapiao.pdf",
        "hub blob": media / "hub" / "ab" / "abcdef",
        "machine log": instance / "console.log",
        "disk image": sandboxes / "disks" / "d1.img",
        "hub layout file": sandboxes / "hub" / "demo" / "tiny" / "config.json",
        "snapshot file": sandboxes / "images" / "abc" / "notes.txt",
        "tool": instance / "tools" / "gpucloud_agent.py",
    }
    for path in paths.values():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x")
    (instance / "mnt" / "data").mkdir(parents=True)
    for path in [data, *data.rglob("*")]:
        os.chmod(path, 0o755 if path.is_dir() else 0o644)
    os.chmod(instance, 0o711)
    settings.DATA_DIR, settings.MEDIA_ROOT, settings.STORAGE_STAGING_DIR = data, media, data / "uploads"
    settings.LOCAL_SANDBOX_ROOT, settings.LOCAL_HUB_ROOT = sandboxes, sandboxes / "hub"
    hub = settings.STORAGES["hub"]
    settings.STORAGES = settings.STORAGES | {
        "hub": {**hub, "OPTIONS": {**hub["OPTIONS"], "location": str(media / "hub")}}
    }
    return data, paths


@pytest.mark.django_db
def test_migrate_makes_an_older_data_folder_private_and_keeps_the_sandboxes_way_in(old_tree):
    data, paths = old_tree
    assert [w.id for w in data_dir.data_folder_private(None)] == ["console.W010"]

    call_command("migrate", verbosity=0)

    # Everything the console keeps is its own: folders 0700, files 0600
    for what in ("database", "broker message", "stored file", "invoice", "machine log", "disk image"):
        assert mode(paths[what]) == 0o600, what
    for folder in (data / "media", data / "media" / "cloudstorage" / "u1", data / "broker"):
        assert mode(folder) == 0o700, folder
    # The way down to the machines' folders can be searched, never listed
    sandboxes = data / "sandboxes"
    for folder in (data, sandboxes, sandboxes / "instances", sandboxes / "disks"):
        assert mode(folder) == 0o711, folder
    # The hub's layouts and the snapshots are closed at the top; what machines mount or run is left as it was
    assert mode(sandboxes / "hub") == mode(sandboxes / "images") == 0o700
    assert mode(paths["hub layout file"]) == mode(paths["tool"]) == 0o644
    assert mode(sandboxes / "instances" / "abc" / "mnt") == 0o755
    # A hub blob is one file with its layouts (a hard link): its folders close it
    assert mode(paths["hub blob"]) == 0o644 and mode(paths["hub blob"].parent) == 0o700
    assert data_dir.data_folder_private(None) == []

    # Run again, nothing changes
    assert data_dir.make_private() == []


def test_the_console_writes_new_files_for_its_user_alone(tmp_path):
    # Every process of the console (web, worker, beat, manage.py, this test run) imports the config package first
    path = tmp_path / "new.txt"
    path.write_text("x")
    (tmp_path / "folder").mkdir()
    assert mode(path) == 0o600 and mode(tmp_path / "folder") == 0o700
