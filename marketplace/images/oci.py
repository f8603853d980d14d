"""The shared OCI layout of imported images, written and read with Debian's ``skopeo`` and ``umoci``.

Every imported image is one tag (its public id) in one OCI image layout under ``IMAGE_IMPORT_ROOT/oci``: blobs are
stored by digest, so a layer two images share is stored once. ``skopeo copy docker://… oci:…`` fills it, ``umoci raw
unpack --rootless`` unpacks an image's layers (whiteouts applied, ownership not restored) into its own root file
system under ``IMAGE_IMPORT_ROOT/rootfs``. The layout's ``index.json`` is rewritten by every copy and removal, so
they hold an exclusive lock on it.

skopeo runs with a home, an auth file and a registries configuration of its own (empty): nothing of the worker's
user (its ``~/.docker/config.json``, the host's mirrors) reaches a user's import. A password is passed in an auth
file readable by the worker only, never on a command line another process could read.
"""

import base64
import contextlib
import fcntl
import hashlib
import ipaddress
import json
import os
import shutil
import subprocess
import tarfile
import tempfile
import time
import zlib
from collections.abc import Callable
from contextlib import contextmanager, nullcontext
from pathlib import Path

from django.conf import settings

from . import bounded, egress
from .references import DIGEST, Reference

SKOPEO = "/usr/bin/skopeo"
UMOCI = "/usr/bin/umoci"
OCI_ARCHIVE, DOCKER_ARCHIVE = "oci-archive", "docker-archive"
MAX_ARCHIVE_MEMBERS = 100_000  # an image's layout has a few dozen; past this it is not one
ACCEPT_ANYTHING = {"default": [{"type": "insecureAcceptAnything"}]}  # the digest pins what a reference names
PUTTING = "oci-put-blob"  # how skopeo names a blob it is still writing into the layout
WATCH_SECONDS = 0.2  # how often a copy's watch is asked


class ToolFailed(Exception):
    """skopeo or umoci refused; the message is its last words."""


class Refused(ToolFailed):
    """The registry sent skopeo to a destination that is not public (a redirect, a token server); nothing was sent
    there. The message is the host."""


class NoSpace(Exception):
    """The layers unpack to more than the space allowed (``args[0]``, bytes)."""


class TooBig(Exception):
    """A manifest or config past the size the console reads."""


def root() -> Path:
    return Path(settings.IMAGE_IMPORT_ROOT)


def layout() -> Path:
    return root() / "oci"


def archive_of(tag: str) -> Path:
    """Where an import's archive is copied while skopeo reads it (the worker's own file, not the user's)."""
    folder = root() / "archives"
    folder.mkdir(parents=True, exist_ok=True)
    return folder / f"{tag}.tar"


def rootfs_of(tag: str) -> Path:
    return root() / "rootfs" / tag


@contextmanager
def locked():
    """The layout's index, one writer at a time (across workers on the host)."""
    root().mkdir(parents=True, exist_ok=True)
    with open(root() / "oci.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _run(argv: list[str], env: dict[str, str] | None = None, watch: Callable[[], str] | None = None) -> str:
    """The tool's output; ToolFailed with its last words when it fails, or when it runs past the import's timeout or
    ``watch()`` (asked a few times a second) names a reason to stop it."""
    name, timeout = Path(argv[0]).name, settings.IMAGE_IMPORT_TIMEOUT_SECONDS
    deadline = time.monotonic() + timeout
    with subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", **(env or {})},
    ) as process:
        try:
            while True:
                left = deadline - time.monotonic()
                try:
                    stdout, stderr = process.communicate(timeout=min(left, WATCH_SECONDS) if watch else max(left, 0))
                    break
                except subprocess.TimeoutExpired:
                    why = f"{name} took longer than {timeout} s" if time.monotonic() >= deadline else watch and watch()
                    if why:
                        raise ToolFailed(why) from None
        except BaseException:  # a reason to stop it, or anything raised while waiting: the tool does not run on
            process.kill()  # skopeo's own namespace, where it has one, goes with it
            process.communicate()
            raise
    if process.returncode != 0:
        words = (stderr or stdout).strip().splitlines()
        raise ToolFailed(words[-1][:500] if words else f"{name} exited with {process.returncode}")
    return stdout


@contextmanager
def _skopeo(*command: str, network: bool = False, host_network: bool = False):
    """skopeo's command line start and environment: a home, policy and registries configuration of its own, and
    with ``network`` the egress proxy (``egress``) as its only way out, from a network namespace of its own unless
    ``host_network`` (a registry on the host's loopback, allowed by the setting). A command that fails after the
    proxy refused a destination raises ``Refused`` naming it."""
    with tempfile.TemporaryDirectory(prefix="skopeo-") as home, _egress(network) as running:
        config = Path(home)
        (config / "policy.json").write_text(json.dumps(ACCEPT_ANYTHING))
        (config / "registries.conf").write_text("")
        argv = [SKOPEO, "--policy", str(config / "policy.json"), *command]
        env = {"HOME": home, "XDG_RUNTIME_DIR": home, "CONTAINERS_REGISTRIES_CONF": str(config / "registries.conf")}
        if running and not host_network and egress.can_isolate():
            argv, proxy_env = egress.isolated(argv, running)
            env |= proxy_env
        elif running:
            if settings.PRODUCTION and not host_network:
                # Without its own network namespace, skopeo would follow a redirect to the host's loopback, which
                # Go sends past any proxy: a production worker imports nothing rather than that.
                raise ToolFailed("bubblewrap is not installed on this worker: imports from registries are off")
            env |= running.env
        try:
            yield config, argv, env
        except ToolFailed as exc:
            if running and running.refused:
                raise Refused(running.refused[0]) from exc
            raise


def _on_loopback(reference: Reference, plain_http: bool) -> bool:
    """Whether the registry is one Go's client reaches without a proxy: the host's loopback, by a literal address
    or ``localhost`` (allowed by the setting, as ``plain_http`` says)."""
    if not plain_http:
        return False
    if reference.host == "localhost":
        return True
    try:
        return ipaddress.ip_address(reference.host).is_loopback
    except ValueError:
        return False


def _egress(network: bool):
    return egress.proxy() if network else nullcontext(None)


def _source(config: Path, reference: Reference, username: str, password: str, plain_http: bool, prefix: str):
    """skopeo's options for reading from the registry: the credentials in an auth file only the worker reads, and
    no TLS for the loopback. ``prefix`` is "src-" for ``copy``, "" for ``inspect``."""
    if username:
        auth = base64.b64encode(f"{username}:{password}".encode()).decode()
        authfile = config / "auth.json"
        authfile.touch(mode=0o600)
        authfile.write_text(json.dumps({"auths": {reference.registry: {"auth": auth}}}))
        options = [f"--{prefix}authfile", str(authfile)]
    else:
        options = [f"--{prefix}no-creds"]
    return [*options, f"--{prefix}tls-verify=false"] if plain_http else options


def copy(
    reference: Reference,
    tag: str,
    *,
    declared: int,
    username: str = "",
    password: str = "",
    plain_http: bool = False,
) -> None:
    """Copy the image ``reference`` names (this host's platform, from a multi-platform list) into the layout as
    ``tag``. ``declared``: the bytes its manifest says its layers are (``packed_size``); a registry that sends more
    is cut off as soon as what skopeo is writing passes that, not after it has written all it was sent."""
    with _skopeo("copy", "--quiet", network=True, host_network=_on_loopback(reference, plain_http)) as (
        config,
        argv,
        env,
    ):
        argv += _source(config, reference, username, password, plain_http, "src-")
        with locked():
            layout().mkdir(parents=True, exist_ok=True)
            try:
                _run([*argv, reference.transport, f"oci:{layout()}:{tag}"], env, watch=_past(declared))
            finally:
                for partial in layout().glob(f"{PUTTING}*"):  # a copy stopped midway leaves its blob being written
                    partial.unlink(missing_ok=True)


def _past(declared: int) -> Callable[[], str]:
    """A watch for a copy into the layout: why to stop it once the blobs it is writing (skopeo writes each to a
    file of its own in the layout's folder before moving it among the blobs) hold more than ``declared`` bytes and
    a manifest's worth more. The layout's lock is held, so the files are this copy's."""
    allowed = declared + settings.IMAGE_MAX_MANIFEST_BYTES

    def watch() -> str:
        writing = 0
        for partial in layout().glob(f"{PUTTING}*"):
            with contextlib.suppress(FileNotFoundError):  # moved among the blobs meanwhile
                writing += partial.stat().st_size
        if writing > allowed:
            return f"the registry sent more than the {declared} bytes its manifest declares"
        return ""

    return watch


def packed_size(
    reference: Reference, *, username: str = "", password: str = "", plain_http: bool = False
) -> tuple[int, Reference]:
    """The bytes of the layers the registry's manifest declares for this host's platform (compressed, as they are
    downloaded), read with ``skopeo inspect --raw`` before any layer is: only manifests are fetched (refused past
    ``IMAGE_MAX_MANIFEST_BYTES``; a multi-platform list leads to this platform's manifest, as ``copy`` picks it). A
    manifest that does not say a layer's size is refused. Returned with the reference pinned to the digest of the
    manifest read, which ``copy`` then copies: a registry cannot show this check one manifest and the copy another.
    skopeo fails a layer that is not the size declared only after writing it; ``copy`` stops it once what it writes
    passes this sum."""
    host_network = _on_loopback(reference, plain_http)
    with _skopeo("inspect", "--raw", network=True, host_network=host_network) as (config, argv, env):
        argv += _source(config, reference, username, password, plain_http, "")
        raw = _run([*argv, reference.transport], env)
        manifest = _manifest(raw)
        if "manifests" in manifest:  # a list of platforms: this host's
            digest = _platform_digest(manifest)
            pinned = Reference(registry=reference.registry, path=reference.path, digest=digest)
            raw = _run([*argv, pinned.transport], env)
            manifest = _manifest(raw)
    sizes = [layer.get("size") if isinstance(layer, dict) else None for layer in manifest.get("layers") or []]
    if not sizes or any(not isinstance(size, int) or size < 0 for size in sizes):
        raise ValueError("the manifest does not declare its layers' sizes")
    digest = "sha256:" + hashlib.sha256(raw.encode()).hexdigest()
    return sum(sizes), Reference(registry=reference.registry, path=reference.path, digest=digest)


def _manifest(text: str) -> dict:
    if len(text.encode()) > settings.IMAGE_MAX_MANIFEST_BYTES:
        raise TooBig("manifest")
    manifest = json.loads(text)
    if not isinstance(manifest, dict):
        raise ValueError("a manifest is an object")
    return manifest


def _platform_digest(index: dict) -> str:
    """The digest of this host's platform's manifest in a multi-platform list."""
    machine = {"x86_64": "amd64", "aarch64": "arm64"}.get(os.uname().machine, os.uname().machine)
    for entry in index.get("manifests") or []:
        platform = entry.get("platform") if isinstance(entry, dict) else None
        if isinstance(platform, dict) and platform.get("os") == "linux" and platform.get("architecture") == machine:
            digest = entry.get("digest")
            if isinstance(digest, str) and DIGEST.match(digest):
                return digest
    raise ValueError(f"no linux/{machine} image in the list")


def archive_kind(path: Path) -> str:
    """skopeo's transport for the archive at ``path``, read from its content: an OCI image layout (``oci-layout``
    at its top) or ``docker save``'s format (``manifest.json``); "" for anything else. Only the members' headers are
    read. A compressed archive is refused (skopeo would unpack it whole onto the host's disk before any limit could
    apply, and gzip packs a thousand bytes of zeros into one), and so is one whose members say they hold more than
    the archive itself (sparse members, which unpack to their full size)."""
    size = path.stat().st_size
    declared = 0
    names = set()
    try:
        with tarfile.open(path, "r:") as archive:
            for count, member in enumerate(archive):
                if count >= MAX_ARCHIVE_MEMBERS:
                    return ""
                names.add(member.name.removeprefix("./"))
                declared += max(member.size, 0)
                if member.issparse() or declared > size:
                    return ""
    except (tarfile.TarError, EOFError, OSError, zlib.error):
        return ""
    if "oci-layout" in names and "index.json" in names:
        return OCI_ARCHIVE
    if "manifest.json" in names:
        return DOCKER_ARCHIVE
    return ""


def copy_archive(path: Path, kind: str, tag: str) -> None:
    """Copy the one image in the archive at ``path`` (``kind`` from :func:`archive_kind`) into the layout as
    ``tag``."""
    if kind not in (OCI_ARCHIVE, DOCKER_ARCHIVE):
        raise ToolFailed(f"unknown archive kind {kind[:40]}")
    with _skopeo("copy", "--quiet") as (_config, argv, env), locked():
        layout().mkdir(parents=True, exist_ok=True)
        _run([*argv, f"{kind}:{path}", f"oci:{layout()}:{tag}"], env)


def _blob(digest: str, limit: int) -> dict:
    algorithm, _sep, value = digest.partition(":")
    if algorithm != "sha256" or not value.isalnum():
        raise ToolFailed(f"unexpected digest {digest[:80]}")
    fd = os.open(layout() / "blobs" / algorithm / value, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as blob:
        if os.fstat(blob.fileno()).st_size > limit:
            raise TooBig(digest)
        return json.loads(blob.read())


def manifest_digest(tag: str) -> str:
    with open(layout() / "index.json", "rb") as index:
        for entry in json.load(index).get("manifests", []):
            if entry.get("annotations", {}).get("org.opencontainers.image.ref.name") == tag:
                return entry["digest"]
    raise ToolFailed(f"{tag} is not in the layout")


def read(tag: str) -> tuple[str, dict, dict]:
    """(manifest digest, manifest, config) of ``tag``, each refused past its size limit before it is parsed."""
    digest = manifest_digest(tag)
    manifest = _blob(digest, settings.IMAGE_MAX_MANIFEST_BYTES)
    config = _blob(manifest["config"]["digest"], settings.IMAGE_MAX_CONFIG_BYTES)
    return digest, manifest, config


def unpack(tag: str, limit: int) -> Path:
    """Unpack ``tag``'s layers into its root file system (a fresh one: what an earlier attempt left is removed). The
    layers are unpacked on a space of ``limit`` bytes (``bounded``) and copied out from there: a layer that
    decompresses to more raises ``NoSpace`` and never fills the host's disk."""
    target = rootfs_of(tag)
    partial = target.with_name(f"{tag}.partial")
    for leftover in (partial, target):
        shutil.rmtree(leftover, ignore_errors=True)
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        with bounded.space(root() / "unpacking", limit) as space:
            unpacked = space / "rootfs"
            try:
                with locked():
                    _run([UMOCI, "raw", "unpack", "--rootless", "--image", f"{layout()}:{tag}", str(unpacked)])
            except ToolFailed as exc:
                if "no space left on device" in str(exc).lower():
                    raise NoSpace(limit) from exc
                raise
            bounded.copy_out(unpacked, partial)
    except (OSError, bounded.local_home.TransientBackendError) as exc:
        shutil.rmtree(partial, ignore_errors=True)
        raise ToolFailed(f"no space to unpack in: {exc}") from exc
    partial.rename(target)
    return target


def remove(tag: str) -> None:
    """Forget ``tag`` and its root file system; blobs no other image names are collected."""
    shutil.rmtree(rootfs_of(tag), ignore_errors=True)
    shutil.rmtree(rootfs_of(tag).with_name(f"{tag}.partial"), ignore_errors=True)
    if not (layout() / "index.json").exists():
        return
    with locked():
        try:
            _run([UMOCI, "rm", "--image", f"{layout()}:{tag}"])
        except ToolFailed:
            pass  # never copied, or already removed
        _run([UMOCI, "gc", "--layout", str(layout())])
