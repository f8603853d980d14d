"""The hub answers the Hugging Face Hub API: the real ``huggingface_hub`` client (pinned in pyproject) creates a
repository, uploads a folder with a small file and one above the LFS threshold, and downloads it back byte for byte
into an empty cache; a second download is served from the client's cache; private repositories are not found by
others; a revoked token is refused; catalogue entries without bytes say they are metadata only."""

import hashlib
import json
import os
import struct
from pathlib import Path

import pytest
import requests
from huggingface_hub import HfApi, hf_hub_download, snapshot_download
from huggingface_hub import constants as hf_constants
from huggingface_hub import file_download as hf_file_download
from huggingface_hub.utils import HfHubHTTPError, RepositoryNotFoundError, RevisionNotFoundError

from accounts import services as console_services
from marketplace.hub import blobs, services
from marketplace.models import HubBlob, HubCommit, HubItem
from marketplace.tests.latest_hf import run_latest
from tests.fixtures.factories import UserFactory

pytestmark = pytest.mark.django_db(transaction=True)
LFS_THRESHOLD = 64 * 1024
CARD = """---
license: apache-2.0
language: [zh, en]
chips: [npu, mlu]
library_name: transformers
---
# Tiny 小模型

一个用于测试的微型语言模型。
"""


def _token(user, scope="read_write"):
    return console_services.create_api_token(user, name="hf", scope=scope)


def _folder(root: Path) -> dict[str, bytes]:
    files = {
        "README.md": CARD.encode(),
        "config.json": b'{"model_type": "gpt2", "n_layer": 2, "vocab_size": 100}\n',
        "weights/model.safetensors": os.urandom(LFS_THRESHOLD * 3 + 17),  # above the threshold: through LFS
    }
    for name, content in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(content)
    return files


@pytest.fixture
def hub(live_server, settings, tmp_path, monkeypatch):
    settings.HUB_LFS_THRESHOLD_BYTES = LFS_THRESHOLD
    settings.MEDIA_ROOT = tmp_path / "media"
    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
    # What HF_ENDPOINT=<the console> does when set before the client is imported (as it is inside instances).
    monkeypatch.setattr(hf_constants, "ENDPOINT", live_server.url)
    template = live_server.url + "/{repo_id}/resolve/{revision}/{filename}"
    monkeypatch.setattr(hf_constants, "HUGGINGFACE_CO_URL_TEMPLATE", template)
    monkeypatch.setattr(hf_file_download, "HUGGINGFACE_CO_URL_TEMPLATE", template)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    served = []  # bytes of file content the server sent: whole files (from local disk) and ranges
    real_range, real_path = blobs.read_range, blobs.download_path

    def counting_range(blob, start, length):
        served.append(length)
        return real_range(blob, start, length)

    def counting_path(blob):
        served.append(blob.size)
        return real_path(blob)

    monkeypatch.setattr(blobs, "read_range", counting_range)
    monkeypatch.setattr(blobs, "download_path", counting_path)
    from django.core.files.storage import storages

    storages._storages.pop("hub", None)  # the storage follows MEDIA_ROOT above
    settings.STORAGES = settings.STORAGES | {
        "hub": {
            "BACKEND": "django.core.files.storage.FileSystemStorage",
            "OPTIONS": {"location": str(tmp_path / "media" / "hub")},
        },
    }
    return live_server.url, served


def test_publish_with_the_real_client_and_download_byte_for_byte(hub, tmp_path):
    url, served = hub
    owner = UserFactory()
    token = _token(owner).plaintext
    api = HfApi(endpoint=url, token=token)
    repo_url = api.create_repo("demo/tiny", private=True)
    assert repo_url.endswith("/demo/tiny")
    with pytest.raises(HfHubHTTPError) as again:
        api.create_repo("demo/tiny")
    assert again.value.response.status_code == 409
    api.create_repo("demo/tiny", exist_ok=True)

    source = tmp_path / "source"
    source.mkdir()
    files = _folder(source)
    info = api.upload_folder(folder_path=source, repo_id="demo/tiny", commit_message="First upload")
    assert len(info.oid) == 40
    commit = HubCommit.objects.get(oid=info.oid)
    assert commit.summary == "First upload" and commit.author == owner
    assert commit.files.get(path="weights/model.safetensors").lfs
    assert not commit.files.get(path="config.json").lfs

    cache = tmp_path / "cache"
    local = Path(snapshot_download("demo/tiny", endpoint=url, token=token, cache_dir=cache))
    for name, content in files.items():
        got = (local / name).read_bytes()
        assert got == content
        assert hashlib.sha256(got).hexdigest() == hashlib.sha256(content).hexdigest()
    sent = sum(served)
    assert sent == sum(len(c) for c in files.values())
    again_path = snapshot_download("demo/tiny", endpoint=url, token=token, cache_dir=cache)
    assert Path(again_path) == local and sum(served) == sent  # answered from the client's cache: no bytes re-sent

    # The card's front matter became the item's fields, and the page finds it by a two-character Chinese word.
    item = HubItem.objects.get(repo="demo/tiny")
    assert item.licence == "apache-2.0" and item.chips == ["npu", "mlu"] and item.languages == ["zh", "en"]
    assert item.head == commit and item.size_bytes == sum(len(c) for c in files.values())

    # Private: not found to another user's token and to no token; a revoked token is refused.
    stranger = _token(UserFactory()).plaintext
    with pytest.raises(RepositoryNotFoundError):
        snapshot_download("demo/tiny", endpoint=url, token=stranger, cache_dir=tmp_path / "c2")
    with pytest.raises(RepositoryNotFoundError):
        HfApi(endpoint=url, token=False).model_info("demo/tiny")
    issued = _token(owner)
    HfApi(endpoint=url, token=issued.plaintext).model_info("demo/tiny")
    console_services.revoke_api_token(owner, issued.token.public_id)
    with pytest.raises(HfHubHTTPError) as revoked:
        HfApi(endpoint=url, token=issued.plaintext).model_info("demo/tiny")
    assert revoked.value.response.status_code == 401
    with pytest.raises(HfHubHTTPError) as read_only:
        HfApi(endpoint=url, token=_token(owner, "read").plaintext).create_repo("demo/other")
    assert read_only.value.response.status_code == 403


def test_a_repository_asked_for_as_private_by_visibility_is_private(hub):
    # Current clients (huggingface_hub 1.x and later) send "visibility"; older ones send "private".
    url, _served = hub
    owner = UserFactory()
    headers = {"Authorization": f"Bearer {_token(owner).plaintext}"}
    for name, body in (("new", {"visibility": "private"}), ("old", {"private": True})):
        made = requests.post(
            f"{url}/api/repos/create", json={"name": name, "organization": "demo", **body}, headers=headers, timeout=10
        )
        assert made.status_code == 200, made.text
        assert requests.get(f"{url}/api/models/demo/{name}", timeout=10).status_code == 404
        assert requests.get(f"{url}/api/models/demo/{name}", headers=headers, timeout=10).json()["private"] is True
    public = requests.post(
        f"{url}/api/repos/create",
        json={"name": "open", "organization": "demo", "visibility": "public"},
        headers=headers,
        timeout=10,
    )
    assert public.status_code == 200 and requests.get(f"{url}/api/models/demo/open", timeout=10).status_code == 200
    for body in (
        {"visibility": "protected"},
        {"visibility": "secret"},
        {"private": "yes"},
        {"visibility": "public", "private": True},
    ):
        refused = requests.post(
            f"{url}/api/repos/create", json={"name": "x", "organization": "demo", **body}, headers=headers, timeout=10
        )
        assert refused.status_code == 400 and refused.json()["error"], body
    assert not HubItem.objects.filter(repo="demo/x").exists()


def test_whoami_bare_names_lists_settings_and_deletion_with_the_pinned_client(hub):
    url, _served = hub
    owner = UserFactory(email="li.wei@example.com")
    api = HfApi(endpoint=url, token=_token(owner).plaintext)
    me = api.whoami()
    assert me["name"] == "li.wei" and me["orgs"] == [] and me["auth"]["accessToken"]["displayName"] == "hf"

    # A bare name goes under the token's own user, as on the Hub; the address it returns leads to its page.
    repo_url = api.create_repo("bare", private=True)
    assert repo_url.endswith("/li.wei/bare") and repo_url.repo_id == "li.wei/bare"
    page = requests.get(str(repo_url), allow_redirects=False, timeout=10)
    assert page.status_code == 301 and page.headers["Location"] == "/marketplace/hub/li.wei/bare"
    data = requests.get(f"{url}/datasets/li.wei/bare", allow_redirects=False, timeout=10)
    assert data.headers["Location"] == "/marketplace/hub/li.wei/bare"
    api.create_repo("demo/public-one")
    api.create_repo("demo/data", repo_type="dataset")

    assert [m.id for m in api.list_models(author="li.wei")] == ["li.wei/bare"]
    assert [m.id for m in HfApi(endpoint=url, token=False).list_models(author="li.wei")] == []  # private
    assert {m.id for m in api.list_models(search="public")} == {"demo/public-one"}
    assert [d.id for d in api.list_datasets(author="demo")] == ["demo/data"]
    assert len(list(api.list_models(author="demo", sort="createdAt", limit=1))) == 1

    api.update_repo_settings("li.wei/bare", private=False)
    assert requests.get(f"{url}/api/models/li.wei/bare", timeout=10).json()["private"] is False
    stranger = HfApi(endpoint=url, token=_token(UserFactory()).plaintext)
    with pytest.raises(HfHubHTTPError) as not_theirs:
        stranger.delete_repo("li.wei/bare")
    assert not_theirs.value.response.status_code == 403
    api.delete_repo("li.wei/bare")
    assert not HubItem.objects.filter(repo="li.wei/bare").exists()
    with pytest.raises(RepositoryNotFoundError):
        api.delete_repo("li.wei/bare")
    api.delete_repo("li.wei/bare", missing_ok=True)


def test_the_newest_client_and_hf_command_line(hub, latest_hf, tmp_path):
    # What a user with today's release does: log in with a console token, ask who they are, create a private
    # repository under their own name, upload, list and download.
    url, _served = hub
    owner = UserFactory(email="wang.fang@example.com")
    token = _token(owner).plaintext
    home = tmp_path / "user"
    home.mkdir()
    login = run_latest(latest_hf, url, home, "hf", "auth", "login", "--token", token)
    assert login.returncode == 0, login.stdout + login.stderr
    who = run_latest(latest_hf, url, home, "hf", "auth", "whoami")
    assert who.returncode == 0 and "wang.fang" in who.stdout, who.stdout + who.stderr

    source = tmp_path / "source"
    source.mkdir()
    files = _folder(source)
    # Through Xet: a 12 MB file of random bytes (chunks stored as they are), text that LZ4 compresses, and
    # 32-bit floats that the client byte-groups before compressing.
    files["weights/big.bin"] = os.urandom(12 * 1024 * 1024)
    files["data/corpus.txt"] = ("一行中文和 English text, repeated.\n" * 60_000).encode()
    files["weights/floats.bin"] = b"".join(struct.pack("<f", 1.0 + i / 1e6) for i in range(300_000))
    for name in ("weights/big.bin", "data/corpus.txt", "weights/floats.bin"):
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        (source / name).write_bytes(files[name])
    script = f"""
import json, sys
from pathlib import Path
from huggingface_hub import HfApi, snapshot_download
api = HfApi()
repo = api.create_repo("fresh", private=True)
api.upload_folder(folder_path={str(source)!r}, repo_id=repo.repo_id, commit_message="from today's client")
local = snapshot_download(repo.repo_id, cache_dir={str(tmp_path / "cache")!r})
print(json.dumps({{"repo": repo.repo_id, "listed": [m.id for m in api.list_models(author="wang.fang")],
                  "files": {{p.relative_to(local).as_posix(): p.read_bytes().hex() for p in Path(local).rglob("*")
                            if p.is_file()}}}}))
"""
    done = run_latest(latest_hf, url, home, "python", "-c", script)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["repo"] == "wang.fang/fresh" and result["listed"] == ["wang.fang/fresh"]
    assert {name: bytes.fromhex(hexed) for name, hexed in result["files"].items()} == files
    assert HubItem.objects.get(repo="wang.fang/fresh").visibility == "private"
    assert requests.get(f"{url}/api/models/wang.fang/fresh", timeout=10).status_code == 404
    assert requests.get(f"{url}/wang.fang/fresh/resolve/main/config.json", timeout=10).status_code == 404
    big = HubBlob.objects.get(sha256=hashlib.sha256(files["weights/big.bin"]).hexdigest())
    assert big.size == 12 * 1024 * 1024  # rebuilt from the xorbs and stored once, by its SHA-256


def test_a_file_uploaded_twice_is_stored_once_and_ranges_are_served(hub, tmp_path):
    url, _served = hub
    owner = UserFactory()
    token = _token(owner).plaintext
    api = HfApi(endpoint=url, token=token)
    big = os.urandom(LFS_THRESHOLD + 5)
    for repo in ("demo/a", "demo/b"):
        api.create_repo(repo)
        api.upload_file(path_or_fileobj=big, path_in_repo="w.bin", repo_id=repo, commit_message="weights")
    assert HubBlob.objects.filter(sha256=hashlib.sha256(big).hexdigest()).count() == 1
    stored = list((tmp_path / "media" / "hub").rglob(hashlib.sha256(big).hexdigest()))
    assert len(stored) == 1

    head = requests.head(f"{url}/demo/a/resolve/main/w.bin", timeout=10)
    assert head.status_code == 200 and head.headers["X-Linked-Size"] == str(len(big))
    assert head.headers["X-Linked-Etag"].strip('"') == hashlib.sha256(big).hexdigest()
    assert len(head.headers["X-Repo-Commit"]) == 40
    part = requests.get(f"{url}/demo/a/resolve/main/w.bin", headers={"Range": "bytes=10-19"}, timeout=10)
    assert part.status_code == 206 and part.content == big[10:20]
    assert part.headers["Content-Range"] == f"bytes 10-19/{len(big)}"
    tail = requests.get(f"{url}/demo/a/resolve/main/w.bin", headers={"Range": "bytes=-7"}, timeout=10)
    assert tail.content == big[-7:]
    past = requests.get(f"{url}/demo/a/resolve/main/w.bin", headers={"Range": f"bytes={len(big)}-"}, timeout=10)
    assert past.status_code == 416

    # A commit that names a large file by its hash alone, without having uploaded it, is refused.
    thief = _token(UserFactory()).plaintext
    HfApi(endpoint=url, token=thief).create_repo("thief/x")
    body = (
        '{"key":"header","value":{"summary":"steal"}}\n'
        f'{{"key":"lfsFile","value":{{"path":"w.bin","algo":"sha256","oid":"{hashlib.sha256(big).hexdigest()}",'
        f'"size":{len(big)}}}}}\n'
    )
    refused = requests.post(
        f"{url}/api/models/thief/x/commit/main",
        data=body.encode(),
        headers={"Authorization": f"Bearer {thief}", "Content-Type": "application/x-ndjson", "Accept-Language": "en"},
        timeout=10,
    )
    assert refused.status_code == 400 and "upload it through LFS first" in refused.json()["error"]

    # An older revision keeps its files.
    first = HubItem.objects.get(repo="demo/a").head.oid
    api.upload_file(path_or_fileobj=b"v2", path_in_repo="w.bin", repo_id="demo/a", commit_message="shrink")
    old = hf_hub_download("demo/a", "w.bin", revision=first, endpoint=url, token=token, cache_dir=tmp_path / "c")
    assert Path(old).read_bytes() == big
    new = hf_hub_download("demo/a", "w.bin", endpoint=url, token=token, cache_dir=tmp_path / "c")
    assert Path(new).read_bytes() == b"v2"


def test_catalogue_entries_without_bytes_say_they_are_metadata_only(hub, tmp_path):
    url, _served = hub
    services.save_catalog_item(repo="Qwen/Qwen2-0.5B", summary="Small Qwen", files=[("model.safetensors", 10**9)])
    info = requests.get(f"{url}/api/models/Qwen/Qwen2-0.5B", timeout=10).json()
    assert info["metadataOnly"] is True and info["sha"] is None
    with pytest.raises(RevisionNotFoundError) as raised:
        snapshot_download("Qwen/Qwen2-0.5B", endpoint=url, token=False, cache_dir=tmp_path / "c")
    assert "metadata only" in str(raised.value) or "仅有元数据" in str(raised.value)
    missing = requests.get(f"{url}/Qwen/Qwen2-0.5B/resolve/main/model.safetensors", timeout=10)
    assert missing.status_code == 404 and missing.headers["X-Error-Code"] == "EntryNotFound"
    # Nobody can publish into the catalogue's namespace.
    with pytest.raises(HfHubHTTPError) as taken:
        HfApi(endpoint=url, token=_token(UserFactory()).plaintext).create_repo("Qwen/evil")
    assert taken.value.response.status_code == 403
