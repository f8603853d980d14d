"""Cloud storage on local disk is a real tree: each account's files at their own paths, one truth for the storage
page, the API, ``gpucloud cp`` and every machine of the account (bound at ``/root/shared``).

With ``STORAGE=local`` an account's files live in ``<cloudstorage location>/<account public id>/`` at their paths
(``/a/b.txt`` is ``<root>/a/b.txt``), folders are real folders. The console writes, renames, moves and deletes
there; a machine writes there through its bind mount. The database's ``Entry`` rows stay the index the pages and
the API read, and :func:`sync` refreshes them from the tree whenever something reads them (a listing, a lookup, the
usage numbers, the daily billing snapshot), so a file a machine wrote is listed, counted and billed from the next
read on. Reconciling on read is the simplest honest design: the tree is what every side writes, nothing has to
notice a write inside a machine, and there is no second copy to drift.

A file row whose ``storage_key`` is empty is in the tree at its path; a non-empty key is the earlier opaque layout
(``<owner public id>/<entry public id>``), which :func:`migrate_layout` (run by a migration) moves into the tree,
and which ``STORAGE=s3`` still uses.

The console runs as root where machines run, and a machine's root is an unprivileged sandbox user on the host:
every path the console follows under an account's root is opened component by component without following
links (``O_NOFOLLOW``), so a link planted inside never leads the console anywhere else, and what it creates is
handed to the account's sandbox user so the machines can change it.
"""

import errno
import fcntl
import logging
import os
import shutil
import stat
import subprocess
import unicodedata
import uuid
from contextlib import contextmanager
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.files.storage import FileSystemStorage, storages
from django.db import transaction
from django.utils.translation import gettext as _

from core.attaching import machines
from core.errors import Unavailable

from . import paths, s3mount
from .choices import EntryKind
from .models import Entry

log = logging.getLogger(__name__)

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
COPY_SIZE = 1024 * 1024


class NoSpace(OSError):
    """The account's file system is full (its quota, on a host that limits it)."""


def enabled() -> bool:
    """Whether accounts' files are a tree on this host: local storage, or S3 mounted (``storage.s3mount``)."""
    if s3mount.enabled():
        return True
    return settings.STORAGE == "local" and isinstance(storages["cloudstorage"], FileSystemStorage)


def location() -> Path:
    return s3mount.location() if s3mount.enabled() else Path(storages["cloudstorage"].location)


def root_of(owner) -> Path:
    """The account's tree on the host (made on first use, mounted first where it is an image)."""
    return location() / str(owner.public_id)


def sandbox_uid(owner) -> int:
    """The host user an account's machines write as (``instances.backends.local.sandbox_uid``)."""
    return int(settings.LOCAL_SANDBOX_UID_BASE) + int(owner.pk)


@contextmanager
def opened_root(owner, *, exclusive: bool = False):
    """An open descriptor on the account's root, under a shared lock that the host's volume code takes
    exclusively while it turns a plain folder into a size-limited image (``instances.backends.local_volumes``)."""
    root = root_of(owner)
    root.parent.mkdir(parents=True, exist_ok=True)
    _mounted(root, owner)
    with open(root.with_name(f".{root.name}.lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        try:
            os.mkdir(root, 0o700)
            _hand_over(root, owner)
        except FileExistsError:
            pass
        fd = os.open(root, DIR_FLAGS)
        try:
            yield fd
        finally:
            os.close(fd)


def _mounted(root: Path, owner) -> None:
    """An account whose tree is an image (made at its first machine's start) has it mounted before the console
    writes: never into the empty folder under it; on S3 the bucket's prefix is mounted there first. (Each takes
    its own lock, so before ours.)"""
    if s3mount.enabled():
        try:
            s3mount.ready(root, sandbox_uid(owner))
        except (OSError, subprocess.SubprocessError) as exc:
            log.error("storage: the bucket cannot be mounted at %s: %s", root, exc)
            raise Unavailable(_("Your cloud storage is temporarily unavailable; try again shortly.")) from exc
        return
    if root.with_name(f"{root.name}.img").exists():
        try:
            machines().volume_ready(root)
        except OSError as exc:
            log.error("storage: the image of %s cannot be mounted: %s", root, exc)
            raise Unavailable(_("Your cloud storage is temporarily unavailable; try again shortly.")) from exc


def _hand_over(path, owner, *, dir_fd=None) -> None:
    # (An S3 mount shows everything as the account's sandbox user's already.)
    if os.geteuid() == 0 and not s3mount.enabled():
        uid = sandbox_uid(owner)
        os.chown(path, uid, uid, dir_fd=dir_fd, follow_symlinks=False)


def _walk(root_fd: int, path: str, *, create: bool = False, owner=None) -> tuple[int, str]:
    """The open parent folder of ``path`` (``/a/b`` → the descriptor of ``a``, ``"b"``), reached without following
    a link. ``create``: make missing folders on the way (``mkdir -p``). The caller closes the descriptor."""
    parts = path.strip("/").split("/")
    fd = os.dup(root_fd)
    try:
        for part in parts[:-1]:
            if create:
                try:
                    os.mkdir(part, 0o755, dir_fd=fd)
                    _hand_over(part, owner, dir_fd=fd)
                except FileExistsError:
                    pass
            child = os.open(part, DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd, parts[-1]


# What the console does -----------------------------------------------------------------------------------------


def make_folder(owner, path: str) -> None:
    with opened_root(owner) as root:
        parent, name = _walk(root, path, create=True, owner=owner)
        try:
            os.mkdir(name, 0o755, dir_fd=parent)
            _hand_over(name, owner, dir_fd=parent)
        except FileExistsError:
            if not stat.S_ISDIR(os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode):
                raise
        finally:
            os.close(parent)
    if s3mount.enabled():
        s3mount.folder_made(str(owner.public_id), path)


def place(owner, path: str, source: Path) -> None:
    """Put the staged file ``source`` at ``path`` (its folders made as needed), never over an existing one:
    a hard link where the staging folder shares the tree's file system, else a copy. ``NoSpace`` when the
    account's file system is full; nothing is left half-written."""
    with opened_root(owner) as root:
        parent, name = _walk(root, path, create=True, owner=owner)
        try:
            try:
                os.link(source, name, dst_dir_fd=parent, follow_symlinks=False)
            except OSError as exc:
                if exc.errno == errno.EEXIST:
                    raise
                _copy_in(source, parent, name)
            _hand_over(name, owner, dir_fd=parent)
        finally:
            os.close(parent)


def _copy_in(source: Path, parent: int, name: str) -> None:
    fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644, dir_fd=parent)
    try:
        with open(source, "rb") as src, os.fdopen(fd, "wb", closefd=False) as dst:
            shutil.copyfileobj(src, dst, COPY_SIZE)
            dst.flush()
            os.fsync(fd)
    except OSError as exc:
        os.close(fd)
        os.unlink(name, dir_fd=parent)
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise NoSpace(exc.errno, os.strerror(exc.errno)) from exc
        raise
    os.close(fd)


def rename(owner, old_path: str, new_path: str) -> None:
    """Move ``old_path`` to ``new_path`` (a file or a folder with everything in it), never over something."""
    with opened_root(owner) as root:
        src, src_name = _walk(root, old_path)
        try:
            dst, dst_name = _walk(root, new_path, create=True, owner=owner)
            try:
                try:
                    os.stat(dst_name, dir_fd=dst, follow_symlinks=False)
                except FileNotFoundError:
                    os.rename(src_name, dst_name, src_dir_fd=src, dst_dir_fd=dst)
                else:
                    raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), new_path)
            finally:
                os.close(dst)
        finally:
            os.close(src)
    if s3mount.enabled():
        s3mount.renamed(str(owner.public_id), old_path, new_path)


def remove(owner, path: str) -> None:
    """Delete ``path``: a file, or a folder with everything in it. Missing is fine."""
    _remove(owner, path)
    if s3mount.enabled():
        s3mount.removed(str(owner.public_id), path)


def _remove(owner, path: str) -> None:
    with opened_root(owner) as root:
        try:
            parent, name = _walk(root, path)
        except (FileNotFoundError, NotADirectoryError):
            return
        try:
            mode = os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode
            if stat.S_ISDIR(mode):
                shutil.rmtree(name, dir_fd=parent)  # never follows a link inside (the fd-based implementation)
            else:
                os.unlink(name, dir_fd=parent)
        except FileNotFoundError:
            pass
        finally:
            os.close(parent)


def open_file(owner, path: str):
    """A read handle on the file at ``path``: a regular file reached without following any link."""
    with opened_root(owner) as root:
        parent, name = _walk(root, path)
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=parent)
        finally:
            os.close(parent)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise FileNotFoundError(errno.ENOENT, "not a regular file", path)
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")


# Reading the tree into the index ---------------------------------------------------------------------------------


def scan(owner) -> dict[str, tuple[str, int]]:
    """Every folder and regular file under the account's root: ``{path: (kind, size)}``. Links, devices and names
    the console could not show (``storage.paths`` rules, or not in NFC) are left out, and so is what is below them."""
    found: dict[str, tuple[str, int]] = {}
    if not s3mount.enabled() and not root_of(owner).exists():
        return found  # (a bucket's prefix is mounted first: an unmounted folder is not an empty account)
    with opened_root(owner) as root:
        _scan(root, paths.ROOT, found, 0)
    return found


def _scan(fd: int, base: str, found: dict, depth: int) -> None:
    if depth >= paths.MAX_DEPTH:
        return
    with os.scandir(fd) as entries:
        listed = list(entries)
    for item in listed:
        name = item.name
        try:
            if unicodedata.normalize("NFC", name) != name or paths.clean_name(name) != name:
                continue
            path = paths.join(base, name)
        except paths.InvalidPath:
            continue
        try:
            info = item.stat(follow_symlinks=False)
        except FileNotFoundError:
            continue
        if stat.S_ISREG(info.st_mode):
            found[path] = (EntryKind.FILE, info.st_size)
        elif stat.S_ISDIR(info.st_mode):
            found[path] = (EntryKind.FOLDER, 0)
            try:
                child = os.open(name, DIR_FLAGS, dir_fd=fd)
            except OSError:
                continue
            try:
                _scan(child, path, found, depth + 1)
            finally:
                os.close(child)


# The tree each account was last found to hold, by this process: a read that finds the same tree again has nothing
# to reconcile and asks the database nothing. Every change the console makes changes the tree too, so an unchanged
# tree means an index that still matches it.
_last_seen: dict[tuple[str, str], int] = {}


def _fingerprint(found: dict) -> int:
    return hash(frozenset(found.items()))


def sync(owner) -> None:
    """Bring the account's index in line with its tree: rows for what a machine made, sizes of what it changed,
    no rows for what it deleted. Files still in the earlier opaque layout are left alone. One writer per account
    at a time (its user row locked)."""
    if not enabled() or owner is None or not getattr(owner, "is_authenticated", True):
        return
    on_disk = scan(owner)
    key = (str(location()), str(owner.public_id))
    seen = _fingerprint(on_disk)
    if _last_seen.get(key) == seen:
        return
    if not _apply(owner, on_disk, _rows(owner)):
        _last_seen[key] = seen
        return

    with transaction.atomic():
        list(get_user_model().objects.select_for_update().filter(pk=owner.pk).values_list("pk"))
        on_disk = scan(owner)
        seen = _fingerprint(on_disk)
        _apply(owner, on_disk, _rows(owner), write=True)
    transaction.on_commit(lambda: _last_seen.__setitem__(key, seen))


def _rows(owner) -> dict:
    return {
        path: (pk, kind, size, key)
        for pk, path, kind, size, key in Entry.objects.filter(owner=owner).values_list(
            "pk", "path", "kind", "size", "storage_key"
        )
    }


def _apply(owner, on_disk: dict, rows: dict, *, write: bool = False) -> bool:
    """Whether the index differs from the tree; with ``write``, make it match."""
    gone = [
        pk
        for path, (pk, kind, _size, key) in rows.items()
        if not key and (path not in on_disk or on_disk[path][0] != kind)
    ]
    changed = [
        (pk, on_disk[path][1])
        for path, (pk, kind, size, key) in rows.items()
        if not key and path in on_disk and kind == EntryKind.FILE and size != on_disk[path][1]
    ]
    folders = {path: pk for path, (pk, kind, _s, _k) in rows.items() if kind == EntryKind.FOLDER}
    new = [
        p
        for p in sorted(on_disk)
        if p not in rows
        and (paths.split(p)[0] == paths.ROOT or paths.split(p)[0] in folders or paths.split(p)[0] in on_disk)
    ]
    if not write:
        return bool(gone or changed or new)
    if gone:
        Entry.objects.filter(pk__in=gone).delete()  # a folder's rows below it go with it (CASCADE)
        return _apply(owner, on_disk, _rows(owner), write=True)
    for pk, size in changed:
        Entry.objects.filter(pk=pk).update(size=size)
    for path in new:  # parents sort before their children
        kind, size = on_disk[path]
        head, name = paths.split(path)
        if head != paths.ROOT and head not in folders:
            continue  # under something the index keeps as a file (the earlier layout): not shown
        made = Entry.objects.create(
            owner=owner,
            parent_id=folders.get(head),
            kind=kind,
            name=name,
            path=path,
            size=size if kind == EntryKind.FILE else 0,
        )
        if kind == EntryKind.FOLDER:
            folders[path] = made.pk
    return True


def sync_all() -> None:
    """Every account that has a tree on this host brought up to date (the billing snapshot's first step); accounts
    whose tree is as this process last found it cost no query."""
    if not enabled() or not location().is_dir():
        return
    ids = [p.name for p in location().iterdir() if p.is_dir() and not p.name.startswith(".") and _is_uuid(p.name)]
    if s3mount.enabled():  # a bucket's prefix is read through its mount, which needs the account's row
        for owner in get_user_model().objects.filter(public_id__in=ids) if ids else ():
            sync(owner)
        return
    stale = []
    for public_id in ids:
        owner = get_user_model()(public_id=public_id)
        if _last_seen.get((str(location()), public_id)) != _fingerprint(scan(owner)):
            stale.append(public_id)
    for owner in get_user_model().objects.filter(public_id__in=stale) if stale else ():
        sync(owner)


def _is_uuid(text: str) -> bool:
    try:
        uuid.UUID(text)
    except ValueError:
        return False
    return True


# The earlier layout ----------------------------------------------------------------------------------------------


def migrate_layout(entry_model, user_model, *, write=print) -> int:
    """Move every file of the opaque layout (``<owner>/<entry>`` in the storage location) to its path in its
    account's tree, folders made as real folders, and clear its key. Idempotent and resumable: a file whose bytes
    are already at their path (an interrupted run) only has its key cleared; one whose bytes are nowhere is left
    as it was and reported. Returns how many files moved."""
    if not enabled():
        return 0
    if s3mount.enabled():
        return _migrate_bucket_layout(entry_model, user_model, write=write)
    base = location()
    moved = 0
    owners = dict(user_model.objects.values_list("pk", "public_id"))

    def made(path: Path, owner_id: int) -> None:
        # What the console makes in a tree is the account's sandbox user's, so its machines can change it.
        if os.geteuid() == 0:
            uid = int(settings.LOCAL_SANDBOX_UID_BASE) + owner_id
            os.chown(path, uid, uid, follow_symlinks=False)

    for owner_id, path in entry_model.objects.filter(kind=EntryKind.FOLDER).values_list("owner_id", "path"):
        folder = base / str(owners[owner_id]) / path.lstrip("/")
        folder.mkdir(parents=True, exist_ok=True)
        made(folder, owner_id)
    files = entry_model.objects.filter(kind=EntryKind.FILE).exclude(storage_key="")
    for pk, owner_id, path, key in files.values_list("pk", "owner_id", "path", "storage_key").iterator():
        old = base / key
        new = base / str(owners[owner_id]) / path.lstrip("/")
        if old.is_file() and not new.exists():
            new.parent.mkdir(parents=True, exist_ok=True)
            os.replace(old, new)
            made(new, owner_id)
            moved += 1
        elif not new.is_file():
            write(f"storage: the bytes of {path} (owner {owner_id}) are missing at {key}; left as they were")
            continue
        entry_model.objects.filter(pk=pk).update(storage_key="")
    return moved


def _migrate_bucket_layout(entry_model, user_model, *, write=print) -> int:
    """The same on S3: each file's object copied (in the bucket, no bytes through this host) from its opaque key to
    its path under its account's prefix and the old object deleted; each folder gets its marker. Idempotent."""
    owners = dict(user_model.objects.values_list("pk", "public_id"))
    for owner_id, path in entry_model.objects.filter(kind=EntryKind.FOLDER).values_list("owner_id", "path"):
        s3mount.folder_made(str(owners[owner_id]), path)
    moved = 0
    files = entry_model.objects.filter(kind=EntryKind.FILE).exclude(storage_key="")
    for pk, owner_id, path, key in files.values_list("pk", "owner_id", "path", "storage_key").iterator():
        if s3mount.move_object(key, str(owners[owner_id]), path):
            moved += 1
        elif not s3mount.object_exists(str(owners[owner_id]), path):
            write(f"storage: the bytes of {path} (owner {owner_id}) are missing at {key}; left as they were")
            continue
        entry_model.objects.filter(pk=pk).update(storage_key="")
    return moved
