"""Cloud storage on S3 as a real tree: each account's part of the bucket mounted on this host with rclone.

With ``STORAGE=s3`` an account's files are the objects under ``<S3_PREFIX>/<account public id>/`` at their paths
(``/a/b.txt`` is ``<prefix>/<account>/a/b.txt``). This host mounts that prefix with ``rclone mount`` (Debian's
``rclone``, FUSE) at ``STORAGE_S3_MOUNT_ROOT/<account public id>``, and everything ``storage.tree`` does on local
storage happens there unchanged: the console writes, renames and deletes through the mount, the index is refreshed
from it when read, and the local backend binds the same mount into every machine of the account at
``/root/shared``. One set of files: the storage page, the API, ``gpucloud cp``, the machines and the bucket.

rclone keeps what is being written in its cache (``--vfs-cache-mode writes``) and uploads it a moment after the
file is closed. That cache sits on a size-limited image of its own (``instances.backends.local_volumes``), so what
a machine writes faster than the bucket takes it fills that image, not the host's disk. The mount shows every file
to its account's sandbox user (``--uid``, ``--default-permissions``) and to root; the folders above it stay the
console's alone.

S3 has no folders. A folder the console makes gets a marker object (``<path>/``, a zero-byte object, which rclone
and the S3 consoles show as a folder) so that it stays while empty; the console moves and deletes those markers
with the folder. A folder made inside a machine lasts while something is in it, as on any S3 mount.

rclone runs with an environment of its own (the bucket's settings as ``RCLONE_CONFIG_*`` variables, no config
file), never the console's: nothing of the console's settings or secrets but the bucket's reaches it.
"""

import errno
import fcntl
import logging
import os
import shutil
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path

from django.conf import settings
from django.core.files.storage import storages

from core.attaching import machines

log = logging.getLogger(__name__)

REMOTE = "gpucloud"
PATH = "/usr/sbin:/usr/bin:/sbin:/bin"
MOUNT_WAIT_SECONDS = 20


def enabled() -> bool:
    return settings.STORAGE == "s3" and bool(settings.STORAGE_S3_MOUNT_ROOT)


def location() -> Path:
    return Path(settings.STORAGE_S3_MOUNT_ROOT)


def available() -> str:
    """Why this host cannot mount the bucket, or ``""`` when it can."""
    if not shutil.which("rclone", path=PATH):
        return "rclone is not installed (Debian package rclone)"
    if not os.path.exists("/dev/fuse"):
        return "/dev/fuse is missing"
    if not (shutil.which("fusermount3", path=PATH) or shutil.which("fusermount", path=PATH)):
        return "fusermount is missing (Debian package fuse3)"
    return ""


# The bucket ------------------------------------------------------------------------------------------------------


def _backend():
    return storages["cloudstorage"]


def _options() -> dict:
    return settings.STORAGES["cloudstorage"]["OPTIONS"]


def prefix_of(account_public_id: str) -> str:
    """The account's prefix in the bucket, without a trailing slash: ``<S3_PREFIX>/<account>``."""
    location_ = str(_options().get("location") or "").strip("/")
    return f"{location_}/{account_public_id}" if location_ else str(account_public_id)


def environment() -> dict:
    """rclone's whole environment: the bucket as the remote ``gpucloud`` and nothing of the console's own."""
    options = _options()
    name = f"RCLONE_CONFIG_{REMOTE.upper()}_"
    env = {"PATH": PATH, "HOME": str(location()), "RCLONE_CONFIG": os.devnull, f"{name}TYPE": "s3"}
    env[f"{name}PROVIDER"] = settings.STORAGE_S3_PROVIDER
    if options.get("endpoint_url"):
        env[f"{name}ENDPOINT"] = options["endpoint_url"]
        env[f"{name}FORCE_PATH_STYLE"] = "true"
    if options.get("region_name"):
        env[f"{name}REGION"] = options["region_name"]
    if options.get("access_key"):
        env[f"{name}ACCESS_KEY_ID"] = options["access_key"]
        env[f"{name}SECRET_ACCESS_KEY"] = options.get("secret_key") or ""
    else:
        env[f"{name}ENV_AUTH"] = "true"
    return env


# Mounting --------------------------------------------------------------------------------------------------------


@contextmanager
def _locked(root: Path):
    with open(root.with_name(f".{root.name}.mount-lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _state(root: Path) -> str:
    """``mounted``, ``stale`` (rclone is gone: the kernel answers "not connected") or ``absent``."""
    try:
        os.stat(root)
    except FileNotFoundError:
        return "absent"
    except OSError as exc:
        if exc.errno == errno.ENOTCONN:
            return "stale"
        raise
    return "mounted" if os.path.ismount(root) else "absent"


def cache_of(root: Path) -> Path:
    return root.with_name(f".{root.name}.cache")


def ready(root: Path, uid: int) -> None:
    """The account's prefix mounted at ``root`` (idempotent, one mounter at a time on this host); ``OSError``
    when it cannot be."""
    state = _state(root)
    if state == "mounted":
        return
    root.parent.mkdir(parents=True, exist_ok=True)
    os.chmod(root.parent, 0o700)
    with _locked(root):
        state = _state(root)
        if state == "mounted":
            return
        if state == "stale":
            _unmount(root)
        why = available()
        if why:
            raise OSError(errno.ENODEV, f"cloud storage cannot be mounted on this host: {why}")
        root.mkdir(mode=0o700, exist_ok=True)
        cache = cache_of(root)
        size_gb = float(settings.STORAGE_S3_CACHE_GB)
        machines().ensure_volume(cache, 0, size_gb)
        _mount(root, cache, uid, size_gb)


def _mount(root: Path, cache: Path, uid: int, cache_gb: float) -> None:
    log_file = root.with_name(f".{root.name}.log")
    argv = [
        "rclone",
        "mount",
        f"{REMOTE}:{_options()['bucket_name']}/{prefix_of(root.name)}",
        str(root),
        "--daemon",
        f"--daemon-wait={MOUNT_WAIT_SECONDS}s",
        "--allow-other",
        "--default-permissions",
        f"--uid={uid}",
        f"--gid={uid}",
        "--umask=077",
        "--vfs-cache-mode=writes",
        f"--cache-dir={cache}",
        # Uploaded files leave the cache when it passes this; what is still being written never does.
        f"--vfs-cache-max-size={max(1, int(cache_gb * 1024 * 0.9))}M",
        f"--vfs-write-back={settings.STORAGE_S3_WRITE_BACK_SECONDS}s",
        f"--dir-cache-time={settings.STORAGE_S3_DIR_CACHE_SECONDS}s",
        "--poll-interval=0",
        "--no-modtime",
        f"--log-file={log_file}",
        "--log-level=NOTICE",
    ]
    try:
        # The daemon rclone leaves behind keeps what it inherits open: no pipe to wait on, its words go to its log.
        done = subprocess.run(
            argv,
            env=environment(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=MOUNT_WAIT_SECONDS + 10,
        )
    except subprocess.TimeoutExpired as exc:
        raise OSError(errno.ETIMEDOUT, "rclone did not mount the cloud storage in time") from exc
    deadline = time.monotonic() + 5
    while _state(root) != "mounted" and time.monotonic() < deadline:
        time.sleep(0.05)
    if _state(root) != "mounted":
        said = _tail(log_file)
        log.error("storage: rclone could not mount %s (exit %s): %s", root, done.returncode, said)
        raise OSError(errno.EIO, f"rclone could not mount the cloud storage: {said[-500:]}")


def _tail(path: Path) -> str:
    try:
        return path.read_text(errors="replace")[-2000:]
    except OSError:
        return ""


def _unmount(root: Path) -> None:
    tool = shutil.which("fusermount3", path=PATH) or shutil.which("fusermount", path=PATH)
    argv = [tool, "-u", "-z", str(root)] if tool else ["umount", "-l", str(root)]
    try:
        subprocess.run(argv, env={"PATH": PATH}, capture_output=True, timeout=30)
    except subprocess.TimeoutExpired as exc:
        raise OSError(errno.ETIMEDOUT, f"{root} could not be unmounted in time") from exc


def unmount_all(base: Path | None = None) -> None:
    """Every account's mount under ``base`` (the mount root) ended, and the caches' images unmounted: what a host's
    shutdown or a test's teardown does. Pending uploads stay in the caches for the next mount."""
    base = base or location()
    if not base.is_dir():
        return
    for root in base.iterdir():
        if root.name.startswith("."):
            continue
        if _state(root) != "absent":
            _unmount(root)
    machines().unmount_volumes(base, base)


def settle(root: Path, timeout: float = 30) -> bool:
    """Wait until rclone has uploaded everything written through ``root`` (its cache holds no file waiting to
    go): what a test does before it reads the bucket, and a host before it stops."""
    deadline = time.monotonic() + timeout
    meta = cache_of(root) / "vfsMeta"
    while time.monotonic() < deadline:
        if not any(_dirty(p) for p in meta.rglob("*") if p.is_file()):
            return True
        time.sleep(0.2)
    return False


def _dirty(meta_file: Path) -> bool:
    try:
        return '"Dirty":true' in meta_file.read_text().replace(" ", "")
    except OSError:
        return False


# Objects and folder markers ---------------------------------------------------------------------------------------


def _client():
    return _backend().connection.meta.client


def _key(account_public_id: str, path: str) -> str:
    return f"{prefix_of(account_public_id)}/{path.strip('/')}/"


def folder_made(account_public_id: str, path: str) -> None:
    """A marker that keeps the folder at ``path`` while it is empty."""
    _client().put_object(Bucket=_options()["bucket_name"], Key=_key(account_public_id, path), Body=b"")


def _markers_under(account_public_id: str, path: str) -> list[str]:
    bucket = _options()["bucket_name"]
    top = _key(account_public_id, path)
    found = []
    for page in _client().get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=top):
        found += [item["Key"] for item in page.get("Contents", ()) if item["Key"].endswith("/")]
    return found


def removed(account_public_id: str, path: str) -> None:
    """The markers of the folder at ``path`` and of the folders in it deleted (the mount deleted the files)."""
    keys = _markers_under(account_public_id, path)
    bucket = _options()["bucket_name"]
    for start in range(0, len(keys), 1000):
        batch = [{"Key": key} for key in keys[start : start + 1000]]
        _client().delete_objects(Bucket=bucket, Delete={"Objects": batch, "Quiet": True})


def renamed(account_public_id: str, old_path: str, new_path: str) -> None:
    """The folder markers under ``old_path`` moved to ``new_path`` (the mount moved the files)."""
    old_top, new_top = _key(account_public_id, old_path), _key(account_public_id, new_path)
    keys = _markers_under(account_public_id, old_path)
    bucket = _options()["bucket_name"]
    for key in keys:
        _client().put_object(Bucket=bucket, Key=new_top + key[len(old_top) :], Body=b"")
    if keys:
        removed(account_public_id, old_path)


def _object_key(account_public_id: str, path: str) -> str:
    return f"{prefix_of(account_public_id)}/{path.strip('/')}"


def _exists(key: str) -> bool:
    try:
        _client().head_object(Bucket=_options()["bucket_name"], Key=key)
    except _client().exceptions.ClientError as exc:
        if exc.response.get("Error", {}).get("Code") in {"404", "NoSuchKey", "NotFound"}:
            return False
        raise
    return True


def object_exists(account_public_id: str, path: str) -> bool:
    return _exists(_object_key(account_public_id, path))


def move_object(old_key: str, account_public_id: str, path: str) -> bool:
    """The object at ``old_key`` (relative to the storage location, the earlier opaque layout) copied in the bucket
    to ``path`` under the account's prefix, then deleted; False when there was nothing at ``old_key``. Never over
    an object already at ``path``."""
    location_ = str(_options().get("location") or "").strip("/")
    source = f"{location_}/{old_key}" if location_ else old_key
    target = _object_key(account_public_id, path)
    if not _exists(source):
        return False
    bucket = _options()["bucket_name"]
    if not _exists(target):
        _client().copy({"Bucket": bucket, "Key": source}, bucket, target)  # multipart for large objects
    _client().delete_object(Bucket=bucket, Key=source)
    return True
