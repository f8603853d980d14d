"""Uploads through the Xet protocol: what ``huggingface_hub`` uses for every large file once ``hf_xet`` is installed
(its default since 1.0), in place of the LFS batch API.

The client asks the hub for a short-lived write token (``/api/{type}s/{repo}/xet-write-token/{rev}``), cuts each
file into content-defined chunks, packs new chunks into *xorbs* that it posts to the CAS address the token names
(``POST {cas}/v1/xorbs/default/{hash}``), then posts a *shard* (``POST {cas}/v1/shards``) that says, for each file,
which chunk ranges of which xorbs make it up and its SHA-256. It then commits the files by SHA-256 as with LFS.

This hub is a CAS server of the simplest honest kind: it keeps each uploader's xorbs by hash (in the hub's
storage, under that user: one user's xorb is never read for another's file), and when a shard arrives it
rebuilds every file it names from those xorbs, checks the file's SHA-256 against what the shard says, and stores
the file once per SHA-256 as an LFS upload would — so downloads, mounts and ``snapshot_download`` over plain HTTP
work as before. It answers no deduplication query (each is "not found") and no upload grant (the client then
posts the xorb itself), as the protocol allows; downloads are served over plain HTTP, so it issues no read tokens.
Protocol: the public Xet specification (xorb, shard, CAS API and authentication documents of ``xet-core``).
"""

import hashlib
import re
import struct
import tempfile
import time

import lz4.block
import lz4.frame
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core import signing
from django.core.files.base import ContentFile
from django.utils.translation import gettext as _

from accounts import tokens
from core.errors import Forbidden, ServiceError

from . import blobs, repos

SALT = "hub-xet-token"
TOKEN_SECONDS = 3600
HASH = re.compile(r"^[0-9a-f]{64}$")
MAX_XORB_BYTES = 64 * 1024 * 1024 + 1024 * 1024  # the protocol's 64 MiB of serialised chunks, and a footer
MAX_SHARD_BYTES = 64 * 1024 * 1024
MAX_CHUNK_BYTES = 128 * 1024
CHUNK_HEADER = struct.Struct("<B3sB3s")
ENTRY = 48
SHARD_HEADER_VERSION = 2
BOOKEND = b"\xff" * 32
WITH_VERIFICATION = 1 << 31
WITH_METADATA_EXT = 1 << 30
LZ4_FRAME_MAGIC = b"\x04\x22\x4d\x18"


class BadObject(ServiceError):
    code = "invalid_xet_object"


def hash_hex(raw: bytes) -> str:
    """A 32-byte Xet hash as the protocol writes it in addresses: four little-endian 64-bit words in hex."""
    return "".join(f"{word:016x}" for word in struct.unpack("<4Q", raw))


# --- Tokens ---------------------------------------------------------------------------------------------------


def write_token(user, item, token_id: int | None, cas_url: str) -> dict:
    """The answer to ``xet-write-token``: a token for the CAS address, good for one user's writes for an hour
    (and no longer than the API token that asked for it lives)."""
    expires = int(time.time()) + TOKEN_SECONDS
    claim = {"u": user.pk, "r": item.pk, **({"t": token_id} if token_id else {})}
    token = signing.dumps(claim, salt=SALT, compress=True)
    return {"accessToken": token, "exp": expires, "casUrl": cas_url}


def token_user(header: str):
    """The user a CAS request's ``Authorization: Bearer`` token was issued to, still active with the API token that
    asked for it; Forbidden otherwise."""
    scheme, _sep, value = (header or "").partition(" ")
    try:
        claim = signing.loads(value.strip(), salt=SALT, max_age=TOKEN_SECONDS) if scheme.lower() == "bearer" else {}
    except signing.BadSignature:
        claim = {}
    user = get_user_model().objects.filter(pk=claim.get("u"), is_active=True).first() if claim else None
    if user is None or ("t" in claim and not tokens.is_active(claim["t"], user)):
        raise Forbidden(_("This Xet token is invalid or has expired: ask the hub for a new one."), code="xet_token")
    return user


# --- Xorbs ----------------------------------------------------------------------------------------------------


def _xorb_name(user, xorb: str) -> str:
    return f"xet/{user.public_id}/{xorb}"


def receive_xorb(user, xorb: str, body: bytes) -> bool:
    """Keep an uploaded xorb for ``user`` (checked to be a well-formed series of chunks); False when it was
    already there."""
    if not HASH.match(xorb):
        raise BadObject(_("A xorb is named by its 64-character hash."))
    if len(body) > MAX_XORB_BYTES:
        raise BadObject(_("A xorb may hold at most 64 MiB."))
    chunks(body)  # refuse what is not a series of chunks before keeping it
    name = _xorb_name(user, xorb)
    if blobs.storage().exists(name):
        return False
    blobs.storage().save(name, ContentFile(body))
    return True


def chunks(body: bytes) -> list[tuple[int, int, int, int]]:
    """Where each chunk of a serialised xorb lies: ``(data offset, compressed size, compression, size)``. A
    footer after the chunks (recent clients add one) ends the series."""
    found, offset = [], 0
    while offset + CHUNK_HEADER.size <= len(body):
        version, packed, scheme, unpacked = CHUNK_HEADER.unpack_from(body, offset)
        packed, unpacked = int.from_bytes(packed, "little"), int.from_bytes(unpacked, "little")
        if version != 0 or scheme > 2 or unpacked > MAX_CHUNK_BYTES or offset + 8 + packed > len(body):
            break  # not a chunk header: the footer
        found.append((offset + CHUNK_HEADER.size, packed, scheme, unpacked))
        offset += CHUNK_HEADER.size + packed
    if not found:
        raise BadObject(_("This xorb holds no chunk."))
    return found


def unpack(data: bytes, scheme: int, size: int) -> bytes:
    """One chunk's bytes: stored as they are, LZ4-compressed, or byte-grouped in fours and then compressed."""
    try:
        if scheme == 0:
            raw = data
        elif data[:4] == LZ4_FRAME_MAGIC:
            raw = lz4.frame.decompress(data)
        else:
            raw = lz4.block.decompress(data, uncompressed_size=size)
    except (RuntimeError, ValueError) as exc:
        raise BadObject(_("A chunk of this xorb cannot be decompressed.")) from exc
    if len(raw) != size:
        raise BadObject(_("A chunk of this xorb is not the size its header says."))
    if scheme == 2:
        raw = _ungroup(raw)
    return raw


def _ungroup(grouped: bytes) -> bytes:
    """Undo byte grouping: the data was split into four groups (byte 0, 1, 2, 3 of every four), the first
    ``len % 4`` groups one byte longer, and the groups written one after another."""
    size = len(grouped)
    lengths = [size // 4 + (1 if g < size % 4 else 0) for g in range(4)]
    out = bytearray(size)
    start = 0
    for g, length in enumerate(lengths):
        out[g::4] = grouped[start : start + length]
        start += length
    return bytes(out)


# --- Shards ---------------------------------------------------------------------------------------------------


def parse_shard(body: bytes) -> list[dict]:
    """The files a shard upload names: each ``{"segments": [(xorb, first chunk, end chunk, bytes)…],
    "sha256": hex or None}``, read from the file info section that follows the 48-byte header."""
    if len(body) > MAX_SHARD_BYTES or len(body) < 48 + ENTRY:
        raise BadObject(_("This is not a shard."))
    version = struct.unpack_from("<Q", body, 32)[0]
    if version != SHARD_HEADER_VERSION:
        raise BadObject(_("This is not a shard."))
    files, offset = [], 48

    def entry(at: int) -> bytes:
        if at + ENTRY > len(body):
            raise BadObject(_("This shard ends in the middle of an entry."))
        return body[at : at + ENTRY]

    while True:
        header = entry(offset)
        offset += ENTRY
        if header[:32] == BOOKEND:
            return files
        flags, count = struct.unpack_from("<II", header, 32)
        if count > 1_000_000:
            raise BadObject(_("This is not a shard."))
        segments = []
        for _index in range(count):
            raw = entry(offset)
            offset += ENTRY
            _flags, length, first, end = struct.unpack_from("<IIII", raw, 32)
            if end <= first:
                raise BadObject(_("A file in this shard names an empty chunk range."))
            segments.append((hash_hex(raw[:32]), first, end, length))
        if flags & WITH_VERIFICATION:
            offset += ENTRY * count
        sha256 = None
        if flags & WITH_METADATA_EXT:
            sha256 = hash_hex(entry(offset)[:32])
            offset += ENTRY
        files.append({"segments": segments, "sha256": sha256})
        if len(files) > 100_000:
            raise BadObject(_("This is not a shard."))


def receive_shard(user, body: bytes) -> int:
    """Rebuild and keep every file a shard names, from ``user``'s xorbs; how many files it named. The first file
    that cannot be rebuilt, or whose SHA-256 is not what the shard says, fails the upload (files rebuilt before
    it stay as uploads of theirs, which only a commit makes part of a repository)."""
    files = parse_shard(body)
    total = sum(length for f in files for *_rest, length in f["segments"])
    repos.check_quota(user, total)
    xorbs: dict[str, tuple[bytes, list]] = {}
    for each in files:
        _rebuild(user, each, xorbs)
    repos.record_usage(user)
    return len(files)


def _rebuild(user, described: dict, xorbs: dict):
    """One file from its segments; ``xorbs`` keeps the last xorb read, which the next segment often names too."""
    storage = blobs.storage()
    digest, size = hashlib.sha256(), 0
    with tempfile.TemporaryFile() as out:
        for xorb, first, end, length in described["segments"]:
            if xorb not in xorbs:
                name = _xorb_name(user, xorb)
                if not storage.exists(name):
                    raise BadObject(_("A file in this shard names a xorb that was not uploaded: upload it first."))
                with storage.open(name, "rb") as handle:
                    content = handle.read()
                xorbs.clear()
                xorbs[xorb] = (content, chunks(content))
            body, laid = xorbs[xorb]
            if end > len(laid):
                raise BadObject(_("A file in this shard names chunks its xorb does not have."))
            written = 0
            for start, packed, scheme, unpacked in laid[first:end]:
                data = unpack(body[start : start + packed], scheme, unpacked)
                digest.update(data)
                out.write(data)
                written += len(data)
            if written != length:
                raise BadObject(_("A file in this shard is not the size its chunks make."))
            size += written
            if size > settings.HUB_MAX_FILE_BYTES:
                raise ServiceError(_("The file is larger than the hub accepts."), code="file_too_large")
        if described["sha256"] is not None and digest.hexdigest() != described["sha256"]:
            raise BadObject(_("A file in this shard does not have the SHA-256 the shard says."))
        out.seek(0)
        return blobs.store_file(out, user=user)
