"""Publishing without a live server: the Hub API's answers to bad input (JSON, the status and the error code the
client maps to its exceptions), namespaces, the back office taking a repository down (audited), and the REST
API's "metadata only"."""

import base64
import hashlib
import io
import json
import os
import os as _os
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from accounts import services as console_services
from accounts.ops.models import AuditEntry
from marketplace.hub import blobs, repos, services
from marketplace.hub import repos as hub_repos
from marketplace.models import HubBlob, HubItem
from storage import mounts
from storage import services as storage_services
from teams import services as team_services
from tests.fixtures.factories import UserFactory

pytestmark = pytest.mark.django_db


def _token(user, scope="read_write"):
    return console_services.create_api_token(user, name="hf", scope=scope).plaintext


def _client(token=None) -> Client:
    headers = {"HTTP_ACCEPT_LANGUAGE": "en"}
    if token:
        headers["HTTP_AUTHORIZATION"] = f"Bearer {token}"
    return Client(**headers)


def _ndjson(*lines) -> bytes:
    return b"\n".join(json.dumps(line).encode() for line in lines)


def _file(path, content: bytes):
    return {"key": "file", "value": {"path": path, "content": base64.b64encode(content).decode(), "encoding": "base64"}}


@pytest.fixture
def published(cloud_storage):
    owner = UserFactory()
    repos.create_repo(owner, name="tiny", organization="demo", private=False, kind="model")
    token = _token(owner)
    made = _client(token).post(
        "/api/models/demo/tiny/commit/main",
        _ndjson(
            {"key": "header", "value": {"summary": "first"}},
            _file("config.json", b"{}"),
        ),
        content_type="application/x-ndjson",
    )
    assert made.status_code == 200, made.content
    return owner, token


@pytest.mark.parametrize(
    ("body", "code"),
    [
        (b"not json", "invalid_commit"),
        (_ndjson({"key": "file", "value": {"path": "a"}}), "invalid_commit"),
        (_ndjson({"key": "header", "value": {"summary": "x"}}, _file("../etc/passwd", b"x")), "invalid_path"),
        (_ndjson({"key": "header", "value": {"summary": "x"}}, _file("/abs", b"x")), "invalid_path"),
        (_ndjson({"key": "header", "value": {"summary": "x"}}, _file(".git/config", b"x")), "invalid_path"),
        (
            _ndjson({"key": "header", "value": {"summary": "x"}}, _file("sub/.GIT/hooks/post-checkout", b"x")),
            "invalid_path",
        ),
        (_ndjson({"key": "header", "value": {"summary": "x"}}, _file(" config.json", b"x")), "invalid_path"),
        (_ndjson({"key": "header", "value": {"summary": "x"}}, _file("weights /a.bin", b"x")), "invalid_path"),
        (
            _ndjson(
                {"key": "header", "value": {"summary": "x"}}, {"key": "deletedFile", "value": {"path": ".git/HEAD"}}
            ),
            "invalid_path",
        ),
        (_ndjson({"key": "header", "value": {"summary": ""}}), "invalid_commit"),
        (_ndjson({"key": "header", "value": {"summary": "x"}}, {"key": "rm -rf", "value": {}}), "invalid_commit"),
        (
            _ndjson(
                {"key": "header", "value": {"summary": "x"}},
                {"key": "file", "value": {"path": "a", "content": "%%%", "encoding": "base64"}},
            ),
            "invalid_commit",
        ),
        (
            _ndjson(
                {"key": "header", "value": {"summary": "x"}},
                {"key": "lfsFile", "value": {"path": "w", "algo": "sha256", "oid": "0" * 64, "size": 3}},
            ),
            "lfs_missing",
        ),
        (b"[1, 2]", "invalid_commit"),
    ],
)
def test_a_bad_commit_is_a_clear_400_and_writes_nothing(published, body, code):
    owner, token = published
    before = HubItem.objects.get(repo="demo/tiny").head_id
    answer = _client(token).post("/api/models/demo/tiny/commit/main", body, content_type="application/x-ndjson")
    assert answer.status_code == 400, answer.content
    assert answer.json()["error"]
    assert HubItem.objects.get(repo="demo/tiny").head_id == before


def test_reading_errors_carry_the_codes_the_client_understands(published):
    owner, token = published
    anonymous = _client()
    assert anonymous.get("/api/models/demo/missing").headers["X-Error-Code"] == "RepoNotFound"
    assert anonymous.get("/api/models/demo/tiny/revision/" + "f" * 40).headers["X-Error-Code"] == "RevisionNotFound"
    missing = anonymous.get("/demo/tiny/resolve/main/nope.bin")
    assert missing.status_code == 404 and missing.headers["X-Error-Code"] == "EntryNotFound"
    assert b"".join(anonymous.get("/demo/tiny/resolve/main/config.json").streaming_content) == b"{}"
    bad_token = _client("gpc_nottoken_x").get("/api/models/demo/tiny")
    assert bad_token.status_code == 401 and bad_token.headers["X-Error-Message"].startswith("Invalid credentials")
    assert anonymous.get("/api/models/demo/tiny/tree/main").json()[0]["path"] == "config.json"


@pytest.mark.parametrize(
    ("body", "status"),
    [
        ({"name": "ok-name", "organization": "demo", "type": "space"}, 400),
        ({"name": "bad name!", "organization": "demo"}, 400),
        ({"name": ["x"], "organization": "demo"}, 400),
        ({"name": "x", "organization": ""}, 400),
        ({"name": "tiny", "organization": "demo"}, 403),  # someone else's namespace: nothing said of its repos
        ({"name": "tiny", "organization": "DEMO"}, 403),
        ({"name": "x", "organization": "demo", "type": ["model"]}, 400),
        ({"name": "mine", "organization": "THUDM"}, 403),
    ],
)
def test_creating_a_repository_refuses_bad_names_and_other_peoples_namespaces(published, catalog_hub, body, status):
    answer = _client(_token(UserFactory())).post("/api/repos/create", body, content_type="application/json")
    assert answer.status_code == status, answer.content
    assert answer.json()["error"]


@pytest.fixture
def catalog_hub(db):
    services.save_catalog_item(repo="THUDM/chatglm3-6b", summary="chat", files=[("model.bin", 10)])


def test_writes_need_a_token_that_may_write_and_a_repository_of_ones_own(published):
    owner, token = published
    body = _ndjson({"key": "header", "value": {"summary": "x"}}, _file("b.txt", b"b"))
    assert _client().post("/api/models/demo/tiny/commit/main", body, content_type="x").status_code == 401
    read_only = _client(_token(owner, "read")).post("/api/models/demo/tiny/commit/main", body, content_type="x")
    assert read_only.status_code == 403
    other = _client(_token(UserFactory())).post("/api/models/demo/tiny/commit/main", body, content_type="x")
    assert other.status_code == 403 and "not yours" in other.json()["error"]
    bad_ticket = Client().put("/hub-lfs/" + "a" * 64 + "?ticket=forged", b"x", content_type="application/octet-stream")
    assert bad_ticket.status_code == 403
    assert _client(token).post("/api/models/demo/tiny/preupload/main", b"{", content_type="x").status_code == 400


def test_the_back_office_takes_a_repository_down_and_restores_it_audited(published, ops_user):
    owner, token = published
    item = HubItem.objects.get(repo="demo/tiny")
    staff = Client()
    staff.force_login(ops_user)
    refused = staff.post(f"/ops/hub/{item.public_id}/take-down/", {"reason": ""})
    assert refused.status_code == 302 and HubItem.objects.get(pk=item.pk).taken_down_at is None
    staff.post(f"/ops/hub/{item.public_id}/take-down/", {"reason": "Licence violation reported"})
    assert AuditEntry.objects.filter(action="hub_repo_taken_down", target_label="demo/tiny").exists()

    assert _client().get("/marketplace/hub/demo/tiny").status_code == 404
    stranger = _client().get("/demo/tiny/resolve/main/config.json")
    assert stranger.status_code == 404 and stranger.headers["X-Error-Code"] == "RepoNotFound"
    mine = _client(token).get("/demo/tiny/resolve/main/config.json")
    assert mine.status_code == 403 and mine.headers["X-Error-Code"] == "DisabledRepo"
    assert "Licence violation reported" in mine.json()["error"]
    page = Client(HTTP_ACCEPT_LANGUAGE="en")
    page.force_login(owner)
    assert "Licence violation reported" in page.get("/marketplace/hub/demo/tiny").content.decode()

    staff.post(f"/ops/hub/{item.public_id}/restore/", {"reason": "Resolved"})
    assert _client().get("/demo/tiny/resolve/main/config.json").status_code == 200
    assert _client().get("/marketplace/hub/", {"q": "tiny"}).status_code == 200
    plain = UserFactory()
    viewer = Client()
    viewer.force_login(plain)
    assert viewer.get("/ops/hub/").status_code == 404


def test_the_rest_api_and_the_page_say_which_entries_are_metadata_only(published, catalog_hub):
    api = _client()
    assert api.get("/api/v1/hub/THUDM/chatglm3-6b").json()["metadata_only"] is True
    assert api.get("/api/v1/hub/demo/tiny").json()["metadata_only"] is False
    page = api.get("/marketplace/hub/THUDM/chatglm3-6b").content.decode()
    assert 'id="metadata-only"' in page and "resolve/main" not in page
    published_page = api.get("/marketplace/hub/demo/tiny").content.decode()
    assert "/demo/tiny/resolve/main/config.json" in published_page and "HF_ENDPOINT" in published_page


@pytest.mark.parametrize(
    "path",
    [
        "/api/models/demo/tiny/revision/a%0Ab",
        "/api/models/demo/tiny/tree/main/a%0Db",
        "/demo/tiny/resolve/main/a%00b",
        "/demo/tiny/resolve/main/a%0Db",
    ],
)
def test_control_characters_in_addresses_are_a_clean_404(published, path):
    answer = _client().get(path)
    assert answer.status_code == 404
    assert "\n" not in answer.get("X-Error-Message", "")


@pytest.mark.parametrize(
    "line",
    [
        _file("a\x00b", b"x"),
        _file("a\nb", b"x"),
        _file("x" * 300, b"x"),
        {"key": "lfsFile", "value": {"path": "w", "algo": "sha256", "oid": "0" * 64, "size": "abc"}},
    ],
)
def test_bad_paths_and_sizes_in_a_commit_are_400(published, line):
    owner, token = published
    body = _ndjson({"key": "header", "value": {"summary": "x"}}, line)
    answer = _client(token).post("/api/models/demo/tiny/commit/main", body, content_type="x")
    assert answer.status_code == 400, answer.content


def test_a_commit_message_with_a_nul_is_refused(published):
    owner, token = published
    body = _ndjson({"key": "header", "value": {"summary": "a\x00b"}}, _file("b.txt", b"b"))
    assert _client(token).post("/api/models/demo/tiny/commit/main", body, content_type="x").status_code == 400


def test_a_path_cannot_be_both_a_file_and_a_folder(published):
    owner, token = published
    body = _ndjson({"key": "header", "value": {"summary": "x"}}, _file("config.json/inner", b"x"))
    answer = _client(token).post("/api/models/demo/tiny/commit/main", body, content_type="x")
    assert answer.status_code == 400 and "both a file and a folder" in answer.json()["error"]


@pytest.mark.parametrize(
    "front",
    ["a: &x [1, 2]\nb: *x\n", "a: " + "[" * 5000 + "]" * 5000 + "\n"],
)
def test_cards_with_aliases_or_deep_nesting_are_refused(published, front):
    owner, token = published
    card = f"---\n{front}---\n# x\n".encode()
    body = _ndjson({"key": "header", "value": {"summary": "card"}}, _file("README.md", card))
    answer = _client(token).post("/api/models/demo/tiny/commit/main", body, content_type="x")
    assert answer.status_code == 400, answer.content
    assert (
        _client().post("/api/validate-yaml", {"content": card.decode()}, content_type="application/json").status_code
        == 400
    )


def test_binary_or_set_values_in_a_card_still_give_plain_json(published):
    owner, token = published
    card = b"---\nlicense: mit\nblob: !!binary aGVsbG8=\nthings: !!set {a, b}\n---\n# x\n"
    body = _ndjson({"key": "header", "value": {"summary": "card"}}, _file("README.md", card))
    assert _client(token).post("/api/models/demo/tiny/commit/main", body, content_type="x").status_code == 200
    info = _client().get("/api/models/demo/tiny")
    assert info.status_code == 200 and info.json()["cardData"]["license"] == "mit"


def test_a_card_with_many_languages_is_committed_with_what_the_filters_hold(published):
    owner, token = published
    languages = ", ".join(f"l{i}" for i in range(40))
    card = f"---\nlanguage: [{languages}]\n---\n# x\n".encode()
    body = _ndjson({"key": "header", "value": {"summary": "card"}}, _file("README.md", card))
    assert _client(token).post("/api/models/demo/tiny/commit/main", body, content_type="x").status_code == 200
    assert len(HubItem.objects.get(repo="demo/tiny").languages) == services.MAX_LIST_ITEMS


def test_a_teams_token_cannot_be_used_on_the_hub(published):

    owner, token = published
    team = team_services.create_team(owner, name="Lab", slug="lab-x")
    team_token = console_services.create_api_token(owner, name="t", scope="read_write", team=team).plaintext
    answer = _client(team_token).get("/api/models/demo/tiny")
    assert answer.status_code == 403 and "personal token" in answer.json()["error"]


def test_older_revisions_count_toward_the_storage_limit(published, settings):
    owner, token = published
    settings.STORAGE_MAX_GB = 20_000 / 1024**3  # 20 kB
    for i in range(3):  # each commit replaces 8 kB with 8 kB of new content: the old stays downloadable
        body = _ndjson({"key": "header", "value": {"summary": f"v{i}"}}, _file("w.bin", bytes([i]) * 8000))
        answer = _client(token).post("/api/models/demo/tiny/commit/main", body, content_type="x")
        assert answer.status_code == (200 if i < 2 else 413), (i, answer.content)


def test_a_taken_down_repository_cannot_be_mounted_even_by_its_owner(published):

    owner, token = published
    hub_repos.take_down(HubItem.objects.get(repo="demo/tiny"), "reported")
    with pytest.raises(Exception) as refused:
        mounts.hub_item(owner, "demo/tiny")
    assert getattr(refused.value, "code", "") == "taken_down"


def test_hub_api_errors_outside_api_follow_the_callers_language_and_shape(published):
    english = _client().get("/demo/tiny/resolve/main/nope.bin")
    assert english.json()["error"] == "nope.bin is not in this revision."
    chinese = Client(HTTP_ACCEPT_LANGUAGE="zh-hans").get("/demo/tiny/resolve/main/nope.bin")
    assert "此版本中没有" in chinese.json()["error"]
    unknown = _client().get("/hub-lfs/" + "a" * 64 + "/verify")  # a route of the hub's, a GET it does not take
    assert unknown.status_code == 405 and "error" in unknown.json()


def test_a_card_with_a_date_as_a_key_is_committed_and_read_back(published):
    owner, token = published
    card = b"---\n2020-01-01: released\nlicense: mit\n---\n# x\n"
    body = _ndjson({"key": "header", "value": {"summary": "card"}}, _file("README.md", card))
    assert _client(token).post("/api/models/demo/tiny/commit/main", body, content_type="x").status_code == 200
    assert _client().get("/api/models/demo/tiny").json()["cardData"]["2020-01-01"] == "released"
    checked = _client().post("/api/validate-yaml", {"content": card.decode()}, content_type="application/json")
    assert checked.status_code == 200


def test_uploaded_files_not_yet_committed_count_toward_the_limit(published, settings):

    owner, token = published
    settings.STORAGE_MAX_GB = 20_000 / 1024**3
    settings.HUB_LFS_THRESHOLD_BYTES = 1000
    api = _client(token)
    for i in range(3):
        data = bytes([i + 1]) * 8000
        oid = hashlib.sha256(data).hexdigest()
        batch = api.post(
            "/demo/tiny.git/info/lfs/objects/batch",
            {"operation": "upload", "objects": [{"oid": oid, "size": len(data)}]},
            content_type="application/json",
        )
        if i == 2:
            assert batch.status_code == 413
            break
        href = batch.json()["objects"][0]["actions"]["upload"]["href"]
        assert (
            Client().put(href.split("testserver", 1)[1], data, content_type="application/octet-stream").status_code
            == 200
        )


@pytest.mark.parametrize("namespace", ["api", "hub", "billing", "Static"])
def test_namespaces_that_are_the_consoles_own_paths_are_reserved(db, namespace):
    answer = _client(_token(UserFactory())).post(
        "/api/repos/create", {"name": "m", "organization": namespace}, content_type="application/json"
    )
    assert answer.status_code == 403 and "reserved" in answer.json()["error"]


def test_a_file_uploaded_resumably_to_cloud_storage_is_committed_from_there(published):

    owner, token = published
    data = os.urandom(300_000)
    upload = storage_services.create_upload(owner, folder_path="/", filename="weights.bin", length=len(data))
    storage_services.write_chunk(
        owner, upload.public_id, offset=0, stream=io.BytesIO(data[:100_000]), content_length=100_000
    )  # a dropped connection here: the upload resumes below
    storage_services.write_chunk(
        owner, upload.public_id, offset=100_000, stream=io.BytesIO(data[100_000:]), content_length=len(data) - 100_000
    )
    page = Client()
    page.cookies["django_language"] = "en"
    page.force_login(owner)
    wanted = {"storage_path": "/weights.bin", "folder": "model", "message": "Add weights"}
    done = page.post("/marketplace/hub/demo/tiny/from-storage", wanted, follow=True)
    assert "Committed 1 files" in done.content.decode()
    got = b"".join(_client().get("/demo/tiny/resolve/main/model/weights.bin").streaming_content)
    assert got == data
    missing = page.post(
        "/marketplace/hub/demo/tiny/from-storage", {"storage_path": "/nope.bin", "message": "x"}, follow=True
    )
    assert "Nothing at" in missing.content.decode()
    stranger = Client()
    stranger.force_login(UserFactory())
    refused = stranger.post("/marketplace/hub/demo/tiny/from-storage", {"storage_path": "/weights.bin", "message": "x"})
    assert refused.status_code == 403


def test_uploads_no_commit_names_are_swept_long_after_and_committed_files_stay(hub_storage, published):

    owner, token = published
    orphan = blobs.store_bytes(b"never committed", user=owner)
    stray = blobs.storage().save(blobs.key("f" * 64), __import__("io").BytesIO(b"left by a refused commit"))
    kept = HubItem.objects.get(repo="demo/tiny").head.files.get().blob
    assert blobs.sweep_orphans() == 0  # too recent
    later = timezone.now() + timedelta(hours=blobs.ORPHAN_AGE_HOURS + 1)
    HubBlob.objects.update(created_at=timezone.now() - timedelta(hours=blobs.ORPHAN_AGE_HOURS + 1))

    old = (later - timedelta(hours=2 * blobs.ORPHAN_AGE_HOURS)).timestamp()
    _os.utime(blobs.storage().path(stray), (old, old))
    assert blobs.sweep_orphans(later) == 2
    assert not HubBlob.objects.filter(pk=orphan.pk).exists() and not blobs.storage().exists(stray)
    assert HubBlob.objects.filter(pk=kept.pk).exists() and blobs.storage().exists(blobs.key(kept.sha256))


def test_the_owner_sees_and_changes_the_visibility_on_the_page(published):
    owner, _token_text = published
    item = HubItem.objects.get(repo="demo/tiny")
    page = Client()
    page.force_login(owner)
    page.cookies["django_language"] = "en"
    html = page.get(f"/marketplace/hub/{item.repo}").content.decode()
    assert 'id="hub-visibility"' in html and "Make private" in html
    assert "hf download" in html and "huggingface-cli" not in html

    response = page.post(f"/marketplace/hub/{item.repo}/visibility", {"private": "true"})
    assert response.status_code == 302
    assert Client().get(f"/marketplace/hub/{item.repo}").status_code == 404  # a stranger no longer sees it
    assert "Make public" in page.get(f"/marketplace/hub/{item.repo}").content.decode()

    stranger = Client()
    stranger.force_login(UserFactory())
    assert stranger.post(f"/marketplace/hub/{item.repo}/visibility", {"private": "false"}).status_code == 404
    page.post(f"/marketplace/hub/{item.repo}/visibility", {"private": "false"})
    assert Client().get(f"/marketplace/hub/{item.repo}").status_code == 200
