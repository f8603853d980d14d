"""The hub's file contents, stored once each under their SHA-256 in the ``hub`` storage (local disk or S3).

A stream is written to a temporary file while it is hashed; when the hash (and size) are what the client announced,
the file is moved into storage under ``ab/cd/abcd…`` — unless a blob with that hash exists already, in which case the
new copy is dropped: a file uploaded twice, to any repositories, is stored once.
"""

import hashlib
import os
import tempfile
from collections.abc import Iterator
from datetime import timedelta

from django.conf import settings
from django.core.files import File
from django.core.files.storage import storages
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from core.errors import ServiceError

from ..models import HubBlob, HubBlobUpload, HubTreeFile

CHUNK = 1024 * 1024


def storage():
    return storages["hub"]


def key(sha256: str) -> str:
    return f"{sha256[:2]}/{sha256[2:4]}/{sha256}"


def git_blob_oid(content: bytes) -> str:
    """The Git object id of a file's content: what a small file's ETag is on the Hub."""
    return hashlib.sha1(b"blob %d\0" % len(content) + content, usedforsecurity=False).hexdigest()


def store_bytes(content: bytes, *, user=None) -> HubBlob:
    sha = hashlib.sha256(content).hexdigest()
    with tempfile.SpooledTemporaryFile(max_size=CHUNK) as handle:
        handle.write(content)
        handle.seek(0)
        return _keep(handle, sha, len(content), user)


def store_stream(read, *, sha256: str, size: int, user=None) -> HubBlob:
    """Store what ``read(n)`` returns, which must be ``size`` bytes hashing to ``sha256``; else nothing is kept."""
    if size > settings.HUB_MAX_FILE_BYTES:
        raise ServiceError(_("The file is larger than the hub accepts."), code="file_too_large")
    digest = hashlib.sha256()
    received = 0
    with tempfile.NamedTemporaryFile(dir=_staging()) as handle:
        while True:
            chunk = read(min(4 * CHUNK, size - received + 1))
            if not chunk:
                break
            received += len(chunk)
            if received > size:
                break
            digest.update(chunk)
            handle.write(chunk)
        if received != size or digest.hexdigest() != sha256:
            raise ServiceError(
                _("The upload does not match the announced size and SHA-256: send the file again."),
                code="checksum_mismatch",
            )
        handle.seek(0)
        return _keep(handle, sha256, size, user)


def store_file(handle, *, user=None) -> HubBlob:
    """Store an uploaded file (a browser's), hashing it as it is copied."""
    digest, size = hashlib.sha256(), 0
    with tempfile.NamedTemporaryFile(dir=_staging()) as copy:
        for chunk in iter(lambda: handle.read(CHUNK), b""):
            digest.update(chunk)
            size += len(chunk)
            if size > settings.HUB_MAX_FILE_BYTES:
                raise ServiceError(_("The file is larger than the hub accepts."), code="file_too_large")
            copy.write(chunk)
        copy.seek(0)
        return _keep(copy, digest.hexdigest(), size, user)


def _staging():
    """Where uploads are written while they are hashed: beside the stored blobs when they are on local disk (so a
    finished file is linked into place, not copied), else the storage uploads' staging folder."""
    try:
        path = storage().path(".staging")
    except NotImplementedError:
        path = settings.STORAGE_STAGING_DIR / "hub"
    os.makedirs(path, exist_ok=True)
    return path


def _keep(handle, sha256: str, size: int, user) -> HubBlob:
    blob = HubBlob.objects.filter(sha256=sha256).first()
    if blob is None:
        name = key(sha256)
        if storage().exists(name) and storage().size(name) != size:
            storage().delete(name)  # a partial write left by a failed store: replaced by these checked bytes
        if not storage().exists(name):
            if not _link_into_place(handle, name):
                storage().save(name, File(handle, name=sha256))
        try:
            with transaction.atomic():
                blob = HubBlob.objects.create(sha256=sha256, size=size)
        except IntegrityError:  # stored at the same moment by another upload of the same content
            blob = HubBlob.objects.get(sha256=sha256)
    if user is not None:
        HubBlobUpload.objects.bulk_create([HubBlobUpload(blob=blob, user=user)], ignore_conflicts=True)
    return blob


def _link_into_place(handle, name: str) -> bool:
    """On local disk, a named staging file is linked into the storage instead of copied (same file system)."""
    source = getattr(handle, "name", None)
    try:
        target = storage().path(name)
    except NotImplementedError:
        return False
    if not isinstance(source, str):
        return False
    handle.flush()
    os.makedirs(os.path.dirname(target), exist_ok=True)
    try:
        os.link(source, target)
    except FileExistsError:
        return True
    except OSError:  # another file system: the storage copies it
        return False
    os.chmod(target, 0o644)
    return True


def open_blob(blob: HubBlob):
    return storage().open(key(blob.sha256), "rb")


def local_path(blob: HubBlob) -> str | None:
    """The blob's file on this machine's disk, when the storage is local (mounts and benchmarks read it)."""
    try:
        return storage().path(key(blob.sha256))
    except NotImplementedError:
        return None


def download_path(blob: HubBlob) -> str | None:
    """The file a whole-file download sends from local disk (None: stream it from the storage)."""
    return local_path(blob)


def read_range(blob: HubBlob, start: int, length: int) -> Iterator[bytes]:
    """``length`` bytes of the blob from ``start``, in chunks, closing the file at the end."""
    handle = open_blob(blob)
    try:
        handle.seek(start)
        left = length
        while left > 0:
            chunk = handle.read(min(CHUNK, left))
            if not chunk:
                break
            left -= len(chunk)
            yield chunk
    finally:
        handle.close()


ORPHAN_AGE_HOURS = 48  # well past an LFS upload address's lifetime: a client commits what it uploaded long before


def sweep_orphans(now=None) -> int:
    """Delete stored files that no commit names, uploaded more than ``ORPHAN_AGE_HOURS`` ago (an upload whose
    commit never came, or was refused), and files in storage that no blob row knows. Returns how many went."""
    cutoff = (now or timezone.now()) - timedelta(hours=ORPHAN_AGE_HOURS)
    orphans = HubBlob.objects.filter(created_at__lt=cutoff).exclude(pk__in=HubTreeFile.objects.values("blob_id"))
    removed = 0
    for blob in orphans.iterator():
        with transaction.atomic():
            locked = HubBlob.objects.select_for_update().filter(pk=blob.pk).first()
            if locked is None or HubTreeFile.objects.filter(blob=locked).exists():
                continue  # named by a commit meanwhile
            locked.delete()
            storage().delete(key(blob.sha256))
            removed += 1
    try:  # files left by a refused commit (written, then its rows rolled back)
        known = set(HubBlob.objects.values_list("sha256", flat=True))
        for top in storage().listdir("")[0]:
            if top.startswith("."):
                continue
            for middle in storage().listdir(top)[0]:
                for name in storage().listdir(f"{top}/{middle}")[1]:
                    path = f"{top}/{middle}/{name}"
                    if name not in known and storage().get_modified_time(path) < cutoff:
                        storage().delete(path)
                        removed += 1
    except (FileNotFoundError, NotImplementedError):
        pass  # no folder yet, or a storage that cannot list its files: only the blob rows above are swept there
    return removed
