"""Cloud storage operations — the only writers of folders, files and uploads.

Pages, the API, the CLI (through the API), the admin and the expiry task all call these functions. Every lookup
goes through ``for_user``, so someone else's file is as absent as a file that never existed.

Uploads follow tus 1.0.0 (core, creation, termination). Bytes of an upload in progress are appended to a staging
file on local disk under an exclusive ``flock`` (one writer per upload; a second one gets 423 Locked, which tus
clients retry). The database ``offset`` only moves forward after the bytes are flushed and fsynced, so a resumed
upload never skips data. When the last byte arrives, the staged file is moved into the storage backend (a
rename on local disk) and the file's row is created in the same step; if either fails, both are undone.
"""

import errno
import fcntl
import hashlib
import logging
import math
import os
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.files import File
from django.core.files.storage import storages
from django.db import IntegrityError, transaction
from django.db.models import Value
from django.db.models.functions import Concat, Substr
from django.utils import timezone
from django.utils.translation import gettext as _

from billing import wallet
from billing.quote import quote_storage
from core.errors import Conflict, NotFound, ServiceError, Unavailable

from . import paths, quota, tree
from .choices import EntryKind, UploadStatus
from .models import Entry, Upload
from .quota import usage_bytes  # noqa: F401  (the entry point billing reads: storage.services.usage_bytes)

log = logging.getLogger(__name__)

READ_SIZE = 1024 * 1024
MAX_NAME_ATTEMPTS = 100


def backend():
    """The storage backend that holds file bytes (the ``cloudstorage`` alias of ``STORAGES``)."""
    return storages["cloudstorage"]


# Lookups ---------------------------------------------------------------------------------------------------------


def get_entry(user, public_id, action: str = "view") -> Entry:
    tree.sync(user)
    try:
        return Entry.objects.for_user(user, action).get(public_id=public_id)
    except (Entry.DoesNotExist, ValueError, TypeError) as exc:
        raise NotFound(_("No such file or folder.")) from exc


def get_folder(user, public_id, action: str = "view") -> Entry:
    entry = get_entry(user, public_id, action)
    if not entry.is_folder:
        raise NotFound(_("No such folder."))
    return entry


def find(user, path, action: str = "view") -> Entry | None:
    """The entry at ``path`` (``None`` for the root); ``NotFound`` if there is none."""
    path = paths.clean_path(path)
    if path == paths.ROOT:
        return None
    tree.sync(user)
    try:
        return Entry.objects.for_user(user, action).get(path=path)
    except Entry.DoesNotExist as exc:
        raise NotFound(_("Nothing at “%(path)s”.") % {"path": path}) from exc


def find_folder(user, path, action: str = "view") -> Entry | None:
    folder = find(user, path, action)
    if folder is not None and not folder.is_folder:
        raise Conflict(_("“%(path)s” is a file, not a folder.") % {"path": folder.path}, code="not_a_folder")
    return folder


def children(user, folder: Entry | None):
    """A folder's listing (``None`` is the root): folders first, then files, by name."""
    tree.sync(user)
    return Entry.objects.for_user(user).filter(parent=folder).listing_order()


def breadcrumbs(user, folder: Entry | None) -> list[Entry]:
    """The folders from the root down to ``folder``, in one query."""
    if folder is None:
        return []
    crumbs = {e.path: e for e in Entry.objects.for_user(user).filter(path__in=paths.ancestors(folder.path))}
    return [crumbs[p] for p in paths.ancestors(folder.path) if p in crumbs]


# Folders, renames, moves, deletes -----------------------------------------------------------------------------------


def _clash(user, path: str) -> Conflict:
    return Conflict(_("“%(path)s” already exists.") % {"path": path}, code="exists")


def create_folder(user, parent: Entry | None, name) -> Entry:
    name = paths.clean_name(name)
    path = paths.join(parent.path if parent else paths.ROOT, name)
    try:
        with transaction.atomic():
            _lock_account(user)
            made = Entry.objects.create(owner=user, parent=parent, kind=EntryKind.FOLDER, name=name, path=path)
            if tree.enabled():
                _on_tree(lambda: tree.make_folder(user, path), path)
            return made
    except IntegrityError as exc:
        raise _clash(user, path) from exc


def _on_tree(change, path: str):
    """A change to the account's tree; what is in the way (a file a machine made there a moment ago) is a clash,
    a full file system is the quota."""
    try:
        return change()
    except FileExistsError as exc:
        raise Conflict(_("“%(path)s” already exists.") % {"path": path}, code="exists") from exc
    except (NotADirectoryError, FileNotFoundError) as exc:
        raise Conflict(
            _("“%(path)s” changed in the meantime; reload and try again.") % {"path": path}, code="changed"
        ) from exc
    except tree.NoSpace as exc:
        raise quota.QuotaExceeded(_("Not enough storage space: your storage is full.")) from exc
    except OSError as exc:
        if exc.errno == errno.EIO:  # the bucket's mount could not take it (its cache of writes full, S3 down)
            log.error("storage: writing %s failed: %s", path, exc)
            raise Unavailable(_("Your cloud storage could not store this right now; try again shortly.")) from exc
        if exc.errno not in (errno.ELOOP, errno.ENOTDIR):  # a link planted where a folder was: never followed
            raise
        raise Conflict(
            _("“%(path)s” changed in the meantime; reload and try again.") % {"path": path}, code="changed"
        ) from exc


def make_folders(user, path) -> Entry | None:
    """``mkdir -p``: the folder at ``path``, creating missing folders on the way; a file in the way is refused."""
    folder = None
    for step in paths.ancestors(paths.clean_path(path)):
        existing = Entry.objects.for_user(user).filter(path=step).first()
        if existing is None:
            try:
                existing = create_folder(user, folder, paths.split(step)[1])
            except Conflict:  # created by a concurrent request a moment ago, or something else is in the way
                existing = Entry.objects.for_user(user).filter(path=step).first()
                if existing is None:
                    raise
        if not existing.is_folder:
            raise Conflict(_("“%(path)s” is a file, not a folder.") % {"path": step}, code="not_a_folder")
        folder = existing
    return folder


def rename(user, public_id, new_name) -> Entry:
    entry = get_entry(user, public_id, "change")
    return _relocate(user, entry, entry.parent, paths.clean_name(new_name))


def move(user, public_id, folder_path, new_name=None) -> Entry:
    """Move into the folder at ``folder_path`` (and rename at the same time when ``new_name`` is given)."""
    entry = get_entry(user, public_id, "change")
    target = find_folder(user, folder_path, "change")
    name = paths.clean_name(new_name) if new_name is not None else entry.name
    return _relocate(user, entry, target, name)


def _relocate(user, entry: Entry, parent: Entry | None, name: str) -> Entry:
    old_path = entry.path
    new_path = paths.join(parent.path if parent else paths.ROOT, name)
    if new_path == old_path:
        return entry
    if entry.is_folder and (parent is not None and (parent.pk == entry.pk or parent.path.startswith(old_path + "/"))):
        raise ServiceError(_("A folder cannot be moved into itself."), code="into_itself")
    with transaction.atomic():
        _lock_account(user)
        tree.sync(user)
        descendants = _descendants(user, entry) if entry.is_folder else Entry.objects.none()
        for path in descendants.values_list("path", flat=True):
            paths.check_length(new_path + path[len(old_path) :])
        if Entry.objects.for_user(user).filter(path=new_path).exists():
            raise _clash(user, new_path)
        try:
            with transaction.atomic():
                descendants.update(path=Concat(Value(new_path), Substr("path", len(old_path) + 1)))
                entry.parent, entry.name, entry.path = parent, name, new_path
                entry.save(update_fields=["parent", "name", "path", "updated_at"])
                if tree.enabled() and (entry.is_folder or not entry.storage_key):
                    _on_tree(lambda: tree.rename(user, old_path, new_path), new_path)
        except IntegrityError as exc:
            raise _clash(user, new_path) from exc
    return entry


def _descendants(user, folder: Entry):
    # A prefix compared with equality, not LIKE: SQLite's LIKE ignores case, and "/A/x" is not inside "/a".
    prefix = folder.path + "/"
    return (
        Entry.objects.for_user(user)
        .alias(head=Substr("path", 1, len(prefix)))
        .filter(head=prefix)
        .exclude(pk=folder.pk)
    )


def delete(user, public_id) -> Entry:
    """Delete a file, or a folder with everything in it (and the uploads in progress into it)."""
    entry = get_entry(user, public_id, "delete")
    with transaction.atomic():
        _lock_account(user)
        files = _descendants(user, entry).files() if entry.is_folder else Entry.objects.filter(pk=entry.pk)
        keys = list(files.values_list("storage_key", flat=True))
        folders = [entry.pk, *_descendants(user, entry).folders().values_list("pk", flat=True)]
        uploads = list(Upload.objects.for_user(user).active().filter(folder__in=folders).values_list("public_id"))
        if entry.is_folder:
            _descendants(user, entry).delete()
        entry.delete()
        if tree.enabled() and (entry.is_folder or not entry.storage_key):
            # In the tree now, under the account's lock: a listing never sees the files without their rows.
            tree.remove(user, entry.path)
        transaction.on_commit(lambda: _remove_bytes(keys, [u for (u,) in uploads]))
    return entry


def _lock_account(user) -> None:
    """The account's row locked for the transaction: its tree and index change one writer at a time (the reads
    that refresh the index from the tree, ``storage.tree.sync``, take it too)."""
    list(get_user_model().objects.select_for_update().filter(pk=user.pk).values_list("pk"))


def _remove_bytes(keys, upload_ids) -> None:
    for key in keys:
        if key:
            backend().delete(key)
    for public_id in upload_ids:
        _staging_path(public_id).unlink(missing_ok=True)


def open_file(user, public_id) -> tuple[Entry, File]:
    """The file and an open handle on its bytes, for a streamed download."""
    entry = get_entry(user, public_id, "view")
    if entry.is_folder:
        raise ServiceError(_("A folder cannot be downloaded; download its files one by one."), code="is_a_folder")
    try:
        if not entry.storage_key and tree.enabled():
            return entry, File(tree.open_file(user, entry.path), name=entry.name)
        return entry, backend().open(entry.storage_key, "rb")
    except (FileNotFoundError, NotADirectoryError) as exc:
        log.error("storage: bytes of %s missing at %s", entry.public_id, entry.storage_key)
        raise Unavailable(_("The file's contents are temporarily unavailable.")) from exc


# Uploads (tus) ----------------------------------------------------------------------------------------------------


class OffsetMismatch(Conflict):
    code = "offset_mismatch"


class UploadLocked(Conflict):
    status = 423
    code = "upload_locked"


def _staging_path(public_id) -> Path:
    return Path(settings.STORAGE_STAGING_DIR) / f"{public_id}.part"


def get_upload(user, public_id) -> Upload:
    try:
        return Upload.objects.for_user(user).select_related("entry").get(public_id=public_id)
    except (Upload.DoesNotExist, ValueError, TypeError) as exc:
        raise NotFound(_("No such upload: it may have expired or been cancelled.")) from exc


def create_upload(user, *, folder_path, filename, length, content_type: str = "") -> Upload:
    """Declare an upload of ``length`` bytes into ``folder_path``: checks the name and the quota before any byte."""
    name = paths.clean_name(filename)
    folder = find_folder(user, folder_path, "change")
    paths.join(folder.path if folder else paths.ROOT, name)
    if not isinstance(length, int) or length < 0:
        raise ServiceError(_("The upload length must be a whole number of bytes."), code="invalid_length")
    with transaction.atomic():
        # One user's parallel uploads are checked one after the other: the row lock on the user serialises
        # them on PostgreSQL, as SQLite's IMMEDIATE transactions already do.
        _lock_account(user)
        quota.check(user, length)
        _require_storage_funds(user, length)
        upload = Upload.objects.create(
            owner=user, folder=folder, filename=name, length=length, content_type=(content_type or "")[:255]
        )
        staging = _staging_path(upload.public_id)
        staging.parent.mkdir(parents=True, exist_ok=True)
        staging.touch(exist_ok=False)
    if length == 0:
        with _locked_staging(upload) as handle:
            _finish(upload, handle)
    return upload


def _require_storage_funds(user, length: int) -> None:
    """Bytes past the free tier are billed per GB-day: an upload that takes the user there passes billing's funds
    and arrears gate for one hour of the extra GB (paid from cash, like every storage charge)."""
    before = quota.usage_bytes(user) + quota.reserved_bytes(user)
    free = quota.free_bytes(user)
    if before + length <= free:
        return
    extra_gb = math.ceil((before + length - max(before, free)) / quota.GB)
    try:
        needed = quote_storage("storage", extra_gb).payable_per_hour
    except ServiceError:  # no storage price published: nothing is charged beyond the free tier yet
        return
    wallet.require_funds(user, needed, compute=False)


@contextmanager
def _locked_staging(upload: Upload) -> Iterator:
    try:
        handle = open(_staging_path(upload.public_id), "r+b")  # noqa: SIM115  (closed below)
    except FileNotFoundError as exc:
        raise NotFound(_("No such upload: it may have expired or been cancelled.")) from exc
    try:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            raise UploadLocked(_("This upload is receiving data from another connection; try again shortly.")) from exc
        yield handle
    finally:
        handle.close()


def write_chunk(user, public_id, *, offset: int, stream, content_length: int) -> Upload:
    """Append one PATCH body at ``offset``; quota re-checked first. Finishes the upload on its last byte."""
    upload = get_upload(user, public_id)
    if upload.is_complete:
        raise OffsetMismatch(_("This upload is already complete."))
    with _locked_staging(upload) as handle:
        try:
            upload.refresh_from_db()  # the offset another request may have moved while we waited for the lock
        except Upload.DoesNotExist as exc:
            raise NotFound(_("No such upload: it may have expired or been cancelled.")) from exc
        if offset != upload.offset:
            raise OffsetMismatch(
                _("Upload-Offset %(sent)d does not match the %(stored)d bytes already received.")
                % {"sent": offset, "stored": upload.offset}
            )
        if offset + content_length > upload.length:
            raise ServiceError(_("The data goes past the declared Upload-Length."), code="exceeds_length")
        try:
            quota.check(user, upload.length, upload=upload)
        except quota.QuotaExceeded:
            _discard(upload)
            raise
        upload.offset = offset + _append(handle, stream, offset, content_length)
        Upload.objects.filter(pk=upload.pk, offset=offset).update(offset=upload.offset, updated_at=timezone.now())
        if upload.offset == upload.length:
            _finish(upload, handle)
    return upload


def _append(handle, stream, offset: int, content_length: int) -> int:
    """Write up to ``content_length`` bytes from ``stream`` at ``offset``; returns how many were stored. A client
    that disconnects mid-chunk keeps what arrived: tus resumes from there."""
    handle.truncate(offset)
    handle.seek(offset)
    written = 0
    while stream is not None and written < content_length:
        try:
            piece = stream.read(min(READ_SIZE, content_length - written))
        except OSError:
            break
        if not piece:
            break
        try:
            handle.write(piece)
        except OSError as exc:
            handle.truncate(offset)
            log.exception("storage: cannot write staging file")
            raise Unavailable(_("The upload could not be stored right now; try again later.")) from exc
        written += len(piece)
    handle.flush()
    os.fsync(handle.fileno())
    return written


class _StagedFile(File):
    """The staged upload, offered to ``Storage.save``: FileSystemStorage moves it into place with a rename."""

    def temporary_file_path(self):
        return self.name


def _finish(upload: Upload, handle) -> None:
    if tree.enabled():
        _finish_in_tree(upload, handle)
        return
    checksum = _sha256(handle)
    key = f"{upload.owner.public_id}/{upload.public_id}"
    staging = _staging_path(upload.public_id)
    with _StagedFile(open(staging, "rb"), name=str(staging)) as staged:
        key = backend().save(key, staged)
    try:
        with transaction.atomic():
            entry = _create_file(upload, key, checksum)
            upload.status, upload.entry, upload.completed_at = UploadStatus.COMPLETE, entry, timezone.now()
            upload.save(update_fields=["status", "entry", "completed_at", "updated_at"])
    except Exception:
        backend().delete(key)
        _discard(upload)
        raise
    staging.unlink(missing_ok=True)


def _finish_in_tree(upload: Upload, handle) -> None:
    """The staged file put at its path in the account's tree and its row made, in one step: the row is created
    first (its name chosen), the bytes placed inside the same transaction, so a failure of either leaves neither."""
    checksum = _sha256(handle)
    staging = _staging_path(upload.public_id)
    owner = upload.owner
    tree.sync(owner)  # what machines made is in the index, so a name they took is not chosen again
    try:
        with transaction.atomic():
            _lock_account(owner)
            entry = _create_file(upload, "", checksum)
            _on_tree(lambda: tree.place(owner, entry.path, staging), entry.path)
            upload.status, upload.entry, upload.completed_at = UploadStatus.COMPLETE, entry, timezone.now()
            upload.save(update_fields=["status", "entry", "completed_at", "updated_at"])
    except Exception:
        _discard(upload)
        raise
    staging.unlink(missing_ok=True)


def _create_file(upload: Upload, key: str, checksum: str) -> Entry:
    """The file row, under the upload's name or the first free "name (n).ext" when the name is taken."""
    try:
        folder = Entry.objects.select_for_update().get(pk=upload.folder_id) if upload.folder_id else None
    except Entry.DoesNotExist as exc:
        raise NotFound(_("The folder was deleted while the file was uploading.")) from exc
    base = folder.path if folder else paths.ROOT
    for n in range(MAX_NAME_ATTEMPTS):
        name = upload.filename if n == 0 else paths.numbered(upload.filename, n)
        path = paths.join(base, name)
        if Entry.objects.filter(owner_id=upload.owner_id, path=path).exists():
            continue
        try:
            with transaction.atomic():
                return Entry.objects.create(
                    owner_id=upload.owner_id,
                    parent=folder,
                    kind=EntryKind.FILE,
                    name=name,
                    path=path,
                    size=upload.length,
                    checksum=checksum,
                    content_type=upload.content_type,
                    storage_key=key,
                )
        except IntegrityError:
            continue
    raise Conflict(_("Too many files named “%(name)s” in this folder.") % {"name": upload.filename})


def _sha256(handle) -> str:
    digest = hashlib.sha256()
    handle.seek(0)
    while piece := handle.read(READ_SIZE):
        digest.update(piece)
    return digest.hexdigest()


def _discard(upload: Upload) -> None:
    """Remove an unfinished upload and its staged bytes: nothing of it remains in the database or on disk."""
    _staging_path(upload.public_id).unlink(missing_ok=True)
    Upload.objects.filter(pk=upload.pk).delete()


def terminate_upload(user, public_id) -> None:
    """tus termination: cancel an upload in progress and free its bytes and its quota reservation."""
    upload = get_upload(user, public_id)
    if upload.is_complete:
        raise Conflict(_("This upload is complete; delete the file instead."), code="upload_complete")
    with _locked_staging(upload):
        _discard(upload)


def upload_expires_at(upload: Upload):
    return upload.updated_at + timedelta(hours=settings.STORAGE_UPLOAD_EXPIRY_HOURS)


def expire_stale_uploads(now=None) -> int:
    """Delete uploads idle past ``STORAGE_UPLOAD_EXPIRY_HOURS`` (finished ones are only forgotten) and staged files
    without an upload. Safe to run twice at once: a busy upload is skipped, a missing file is no error."""
    now = now or timezone.now()
    cutoff = now - timedelta(hours=settings.STORAGE_UPLOAD_EXPIRY_HOURS)
    removed = 0
    for upload in Upload.objects.filter(updated_at__lt=cutoff).select_related("owner"):
        if upload.is_complete:
            Upload.objects.filter(pk=upload.pk).delete()
            continue
        try:
            with _locked_staging(upload):
                _discard(upload)
        except UploadLocked:
            continue
        except NotFound:
            Upload.objects.filter(pk=upload.pk).delete()
        removed += 1
    removed += _sweep_orphans(cutoff)
    return removed


def _sweep_orphans(cutoff) -> int:
    staging = Path(settings.STORAGE_STAGING_DIR)
    if not staging.is_dir():
        return 0
    known = {str(u) for u in Upload.objects.active().values_list("public_id", flat=True)}
    removed = 0
    for part in staging.glob("*.part"):
        if part.stem not in known and part.stat().st_mtime < cutoff.timestamp():
            part.unlink(missing_ok=True)
            removed += 1
    return removed
