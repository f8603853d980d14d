"""The data folder is the console's user's alone: no other host user, a sandbox's among them, reads any of it.

New files are private by the process's umask (``config/__init__.py``) and Django's upload permissions (settings).
:func:`make_private` brings a tree made before that (files 0644 in 0755 folders) to the same state; ``manage.py
migrate`` runs it after every migration run (:func:`after_migrate`), as Django's own apps create their permissions
then: it runs at every deploy and every ``make run``, on whatever host the folder is, and it is idempotent. A data
migration would run once per database instead, never again for a folder that moved, was restored, or lives on
another host than the database.

What it does, in ``DATA_DIR``, ``MEDIA_ROOT`` and ``STORAGE_STAGING_DIR``: folders 0700 and files 0600 (only the
group's and others' bits are taken away). Exceptions, each still out of any other user's reach:

* the way down to the local backend's sandbox root (``LOCAL_SANDBOX_ROOT``) and its ``instances``, ``disks`` and
  ``shared`` folders stay searchable (0711, never readable): a sandbox's user walks to its own instance folder;
  inside the sandbox root the backend sets every mode itself, so only loose files of the console's user directly in
  those folders (the machines' logs, images, locks) are made 0600, and the hub's and snapshots' folders 0700;
* the hub's stored blobs keep their mode (0644): each is hard-linked into the folders machines mount read-only, so
  it is one file with them; the folders that lead to the blobs are 0700.

Nothing that belongs to another user (a machine's home, a disk's files) is touched, and no link is followed.
"""

import logging
import os
import stat
from pathlib import Path

from django.conf import settings
from django.core.checks import Warning as CheckWarning
from django.core.checks import register

PRIVATE_FOLDER, PRIVATE_FILE = 0o700, 0o600
log = logging.getLogger(__name__)

SEARCH_ONLY = 0o011  # group and others may pass through a folder to what they know the name of, never list it
SANDBOX_FOLDERS = ("instances", "disks", "shared")  # searchable: the sandboxes' users reach their own below


def roots() -> list[Path]:
    """The folders the console writes its data in (those that exist), outermost first."""
    found = []
    for path in (settings.DATA_DIR, settings.MEDIA_ROOT, settings.STORAGE_STAGING_DIR):
        path = Path(path).absolute()
        if path.is_dir() and not any(path.is_relative_to(other) for other in found):
            found.append(path)
    return found


def _sandbox_root() -> Path:
    return Path(settings.LOCAL_SANDBOX_ROOT).absolute()


def _hub_blobs() -> Path | None:
    location = settings.STORAGES.get("hub", {}).get("OPTIONS", {}).get("location")
    return Path(location).absolute() if location else None


class _Tightener:
    def __init__(self):
        self.uid = os.geteuid()
        self.sandboxes = _sandbox_root()
        self.blobs = _hub_blobs()
        self.changed: list[Path] = []

    def chmod(self, path: Path, found: os.stat_result, keep: int = 0) -> None:
        """Take the group's and others' bits off ``path`` but ``keep``; only the console user's own entries."""
        if found.st_uid != self.uid or stat.S_ISLNK(found.st_mode):
            return
        mode = stat.S_IMODE(found.st_mode)
        wanted = (mode & ~0o077) | (mode & keep)
        if wanted != mode:
            os.chmod(path, wanted, follow_symlinks=False)
            self.changed.append(path)

    def walk(self, path: Path) -> None:
        try:
            found = os.lstat(path)
        except FileNotFoundError:
            return
        if stat.S_ISLNK(found.st_mode):
            return
        if not stat.S_ISDIR(found.st_mode):
            keep = 0o777 if self.blobs is not None and path.is_relative_to(self.blobs) else 0
            self.chmod(path, found, keep=keep)
            return
        if path == self.sandboxes:
            self.sandbox_root(path, found)
            return
        on_the_way = self.sandboxes.is_relative_to(path)
        self.chmod(path, found, keep=SEARCH_ONLY if on_the_way else 0)
        if found.st_uid != self.uid:
            return  # another user's folder: its contents are that user's
        for entry in os.scandir(path):
            self.walk(Path(entry.path))

    def sandbox_root(self, path: Path, found: os.stat_result) -> None:
        self.chmod(path, found, keep=SEARCH_ONLY)
        for entry in os.scandir(path):
            child = Path(entry.path)
            found = os.lstat(child)
            if entry.name in SANDBOX_FOLDERS and stat.S_ISDIR(found.st_mode):
                self.chmod(child, found, keep=SEARCH_ONLY)
                folders = [Path(e.path) for e in os.scandir(child) if e.is_dir(follow_symlinks=False)]
                for folder in [child, *(folders if entry.name == "instances" else [])]:
                    self.loose_files(folder)
            else:
                self.chmod(child, found)  # the hub's layouts, snapshots, anything else: closed at the top

    def loose_files(self, folder: Path) -> None:
        """The regular files of the console's user directly in ``folder`` (logs, images, locks) made 0600."""
        for entry in os.scandir(folder):
            if entry.is_file(follow_symlinks=False):
                self.chmod(Path(entry.path), os.lstat(entry.path))


def make_private() -> list[Path]:
    """Make the data folders private (see the module's description); returns what changed."""
    tightener = _Tightener()
    for root in roots():
        tightener.walk(root)
    if tightener.sandboxes.is_dir() and not any(tightener.sandboxes.is_relative_to(r) for r in roots()):
        tightener.walk(tightener.sandboxes)
    return tightener.changed


def after_migrate(sender, **kwargs) -> None:
    changed = make_private()
    if changed:
        log.warning("made %d files and folders of the data folder private to the console's user", len(changed))


@register()
def data_folder_private(app_configs, **kwargs):
    """A data folder others can read or list (made before it was kept private, or by hand) is reported."""
    problems = []
    for root in roots():
        allowed = SEARCH_ONLY if _sandbox_root().is_relative_to(root) and root != _sandbox_root() else 0
        if stat.S_IMODE(os.stat(root).st_mode) & 0o077 & ~allowed:
            problems.append(
                CheckWarning(
                    f"{root} can be read by other users of this host, sandboxes' users among them.",
                    hint="Run manage.py migrate: it makes the data folder private to the console's user.",
                    id="console.W010",
                )
            )
    return problems
