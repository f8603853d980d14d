"""Xet uploads, byte by byte: xorbs and shards made here as the protocol lays them out (the real ``hf_xet`` client is
tried end to end in test_hf_api.py), and what the hub refuses — other people's xorbs, a wrong SHA-256, garbage, and
tokens that are not (or no longer) good."""

import hashlib
import json
import os
import struct

import lz4.block
import pytest
from django.test import Client

from accounts import services as console_services
from marketplace.hub import repos, xet
from marketplace.models import HubBlob, HubItem
from tests.fixtures.factories import UserFactory

pytestmark = pytest.mark.django_db


def _raw(hex_hash: str) -> bytes:
    """The 32 bytes whose protocol name (four little-endian words in hex) is ``hex_hash``."""
    return struct.pack("<4Q", *(int(hex_hash[i : i + 16], 16) for i in range(0, 64, 16)))


def _xorb(*chunks: bytes) -> bytes:
    """A serialised xorb: the first chunk as it is, the others LZ4-compressed."""
    out = b""
    for index, chunk in enumerate(chunks):
        scheme, data = (0, chunk) if index == 0 else (1, lz4.block.compress(chunk, store_size=False))
        out += struct.pack("<B", 0) + len(data).to_bytes(3, "little") + struct.pack("<B", scheme)
        out += len(chunk).to_bytes(3, "little") + data
    return out


def _shard(*files) -> bytes:
    """A shard naming ``files``: each ``(segments, sha256)`` with segments ``(xorb, first, end, bytes)``."""
    body = b"HFRepoMetaData".ljust(32, b"\0") + struct.pack("<QQ", 2, 0)
    for segments, sha in files:
        body += os.urandom(32) + struct.pack("<II8x", xet.WITH_METADATA_EXT, len(segments))
        for xorb, first, end, length in segments:
            body += _raw(xorb) + struct.pack("<IIII", 0, length, first, end)
        body += _raw(sha) + bytes(16)
    return body + xet.BOOKEND + bytes(16) + xet.BOOKEND + bytes(16)


@pytest.fixture
def owner(cloud_storage):
    user = UserFactory()
    repos.create_repo(user, name="tiny", organization="demo", private=False, kind="model")
    return user


def _token(user, scope="read_write"):
    return console_services.create_api_token(user, name="hf", scope=scope)


def _xet_token(client: Client, token: str) -> dict:
    answer = client.get("/api/models/demo/tiny/xet-write-token/main", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert answer.status_code == 200, answer.content
    return answer.json()


def _cas(client, method, path, body, token):
    call = client.post if method == "POST" else client.get
    headers = {"HTTP_AUTHORIZATION": f"Bearer {token}", "HTTP_ACCEPT_LANGUAGE": "en"}
    return call(f"/hub-xet/v1/{path}", body, content_type="application/octet-stream", **headers)


def test_a_file_sent_as_a_xorb_and_a_shard_is_rebuilt_stored_once_and_committed(owner):
    client = Client()
    api_token = _token(owner).plaintext
    issued = _xet_token(client, api_token)
    assert issued["casUrl"].endswith("/hub-xet") and issued["exp"] > 0
    parts = [os.urandom(70_000), b"compressible " * 6_000, os.urandom(9_000)]
    content = b"".join(parts)
    sha = hashlib.sha256(content).hexdigest()
    name = hashlib.sha256(b"xorb").hexdigest()

    answer = _cas(client, "POST", f"xorbs/default/{name}", _xorb(*parts), issued["accessToken"])
    assert answer.status_code == 200 and answer.json() == {"was_inserted": True}
    again = _cas(client, "POST", f"xorbs/default/{name}", _xorb(*parts), issued["accessToken"])
    assert again.json() == {"was_inserted": False}
    # Deduplication is not offered: the client is told "not found" and uploads the chunks.
    assert _cas(client, "GET", f"chunks/default-merkledb/{name}", b"", issued["accessToken"]).status_code == 404
    assert _cas(client, "POST", f"xorb-grants/default/{name}", b"{}", issued["accessToken"]).status_code == 404

    shard = _shard(([(name, 0, 2, len(parts[0]) + len(parts[1])), (name, 2, 3, len(parts[2]))], sha))
    answer = _cas(client, "POST", "shards", shard, issued["accessToken"])
    assert answer.status_code == 200, answer.content
    assert HubBlob.objects.get(sha256=sha).size == len(content)

    header = {"key": "header", "value": {"summary": "through xet"}}
    lfs = {"key": "lfsFile", "value": {"path": "weights.bin", "algo": "sha256", "oid": sha, "size": len(content)}}
    committed = client.post(
        "/api/models/demo/tiny/commit/main",
        "\n".join(map(json.dumps, [header, lfs])),
        content_type="application/x-ndjson",
        HTTP_AUTHORIZATION=f"Bearer {api_token}",
    )
    assert committed.status_code == 200, committed.content
    downloaded = client.get("/demo/tiny/resolve/main/weights.bin")
    assert b"".join(downloaded.streaming_content) == content


def test_a_shard_cannot_use_another_users_xorb_or_claim_a_wrong_sha256(owner):
    client = Client()
    theirs = _xet_token(client, _token(owner).plaintext)["accessToken"]
    chunk = os.urandom(20_000)
    name = hashlib.sha256(b"theirs").hexdigest()
    assert _cas(client, "POST", f"xorbs/default/{name}", _xorb(chunk), theirs).status_code == 200

    other = UserFactory()
    repos.create_repo(other, name="mine", organization="other", private=False, kind="model")
    mine = client.get(
        "/api/models/other/mine/xet-write-token/main", HTTP_AUTHORIZATION=f"Bearer {_token(other).plaintext}"
    ).json()["accessToken"]
    sha = hashlib.sha256(chunk).hexdigest()
    stolen = _cas(client, "POST", "shards", _shard(([(name, 0, 1, len(chunk))], sha)), mine)
    assert stolen.status_code == 400 and "not uploaded" in stolen.json()["error"]
    assert not HubBlob.objects.filter(sha256=sha).exists()

    wrong = _cas(client, "POST", "shards", _shard(([(name, 0, 1, len(chunk))], "0" * 64)), theirs)
    assert wrong.status_code == 400 and "SHA-256" in wrong.json()["error"]
    beyond = _cas(client, "POST", "shards", _shard(([(name, 0, 5, len(chunk))], sha)), theirs)
    assert beyond.status_code == 400
    assert not HubBlob.objects.filter(sha256=sha).exists()
    assert _cas(client, "POST", "shards", b"not a shard", theirs).status_code == 400
    assert _cas(client, "POST", f"xorbs/default/{name[::-1]}", b"\x07" * 100, theirs).status_code == 400


def test_xet_tokens_follow_the_api_token_and_the_repository(owner):
    client = Client()
    # A read-only token, another user's repository and no token get no write token.
    read_only = _token(owner, "read").plaintext
    refused = client.get("/api/models/demo/tiny/xet-write-token/main", HTTP_AUTHORIZATION=f"Bearer {read_only}")
    assert refused.status_code == 403
    stranger = _token(UserFactory()).plaintext
    refused = client.get("/api/models/demo/tiny/xet-write-token/main", HTTP_AUTHORIZATION=f"Bearer {stranger}")
    assert refused.status_code == 403
    assert client.get("/api/models/demo/tiny/xet-write-token/main").status_code == 401

    issued = _token(owner)
    token = _xet_token(client, issued.plaintext)["accessToken"]
    name = hashlib.sha256(b"x").hexdigest()
    assert _cas(client, "POST", f"xorbs/default/{name}", _xorb(b"a" * 100), "forged").status_code == 401
    assert _cas(client, "POST", f"xorbs/default/{name}", _xorb(b"a" * 100), token + "x").status_code == 401
    console_services.revoke_api_token(owner, issued.token.public_id)
    assert _cas(client, "POST", f"xorbs/default/{name}", _xorb(b"a" * 100), token).status_code == 401
    assert not HubItem.objects.filter(repo="demo/tiny", head__isnull=False).exists()
