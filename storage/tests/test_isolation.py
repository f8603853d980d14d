"""Nobody but the owner can list, read, download, rename, move or delete a file or folder, or touch an upload.

Every storage route is tried as the owner, a teammate (read-only token, in no team with the owner) and a stranger:
the others get the same 404 as for an object that does not exist, and nothing changes. What a team's members reach
of the team's storage is tried in ``tests/test_isolation_matrix.py``.
"""

import pytest
from rest_framework.test import APIClient

from accounts import services as console_services
from storage import services
from storage.models import Entry, Upload

from .fixtures import TUS, store_file

pytestmark = pytest.mark.django_db


@pytest.fixture
def owned(owner):
    file = store_file(owner, "/secret/plan.txt", b"top secret")
    folder = Entry.objects.get(owner=owner, path="/secret")
    upload = services.create_upload(owner, folder_path="/secret", filename="pending.bin", length=100)
    return {"file": file.public_id, "folder": folder.public_id, "upload": upload.public_id}


API_ROUTES = [
    ("get", "/api/v1/storage/entries/{file}", None),
    ("get", "/api/v1/storage/entries/{folder}", None),
    ("get", "/api/v1/storage/entries/{file}/download", None),
    ("patch", "/api/v1/storage/entries/{file}", {"name": "mine.txt"}),
    ("patch", "/api/v1/storage/entries/{file}", {"folder": "/"}),
    ("delete", "/api/v1/storage/entries/{file}", None),
    ("delete", "/api/v1/storage/entries/{folder}", None),
    ("get", "/api/v1/storage/uploads/{upload}", None),
    ("head", "/api/v1/storage/uploads/{upload}", None),
    ("delete", "/api/v1/storage/uploads/{upload}", None),
]


def _call(client, method, url, body):
    kwargs = {"format": "json"} if body is not None else {}
    if "/uploads/" in url:
        kwargs |= TUS
    return getattr(client, method)(url, body, **kwargs) if body is not None else getattr(client, method)(url, **kwargs)


@pytest.fixture
def teammate_rw_api(teammate):
    issued = console_services.create_api_token(teammate, name="rw", scope="read_write")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {issued.plaintext}")
    return client


@pytest.mark.parametrize(("method", "route", "body"), API_ROUTES)
@pytest.mark.parametrize("persona", ["teammate_api", "teammate_rw_api", "stranger_api"])
def test_others_get_404_from_every_storage_api_route(request, owned, persona, method, route, body):
    client = request.getfixturevalue(persona)
    response = _call(client, method, route.format(**owned), body)
    if persona == "teammate_api" and method in {"patch", "delete"}:
        # A read-only token is refused every write before any lookup: the same 403 for any id, so it reveals
        # nothing; with a read-write token the teammate gets the 404.
        assert response.status_code == 403
    else:
        assert response.status_code == 404
    assert Entry.objects.filter(public_id=owned["file"], path="/secret/plan.txt").exists()
    assert Upload.objects.filter(public_id=owned["upload"]).exists()


@pytest.mark.parametrize(("method", "route", "body"), API_ROUTES)
def test_the_owner_may_use_every_storage_api_route(owner_api, owned, method, route, body):
    response = _call(owner_api, method, route.format(**owned), body)
    assert response.status_code in {200, 204}


def test_a_stranger_cannot_patch_bytes_into_someone_elses_upload(stranger_api, owned):
    response = stranger_api.generic(
        "PATCH",
        f"/api/v1/storage/uploads/{owned['upload']}",
        data=b"evil",
        content_type="application/offset+octet-stream",
        HTTP_UPLOAD_OFFSET="0",
        **TUS,
    )
    assert response.status_code == 404 and Upload.objects.get(public_id=owned["upload"]).offset == 0


def test_paths_are_per_user_so_a_stranger_lists_only_their_own_tree(stranger_api, owned, stranger):
    assert stranger_api.get("/api/v1/storage/entries", {"path": "/secret"}).status_code == 404
    assert stranger_api.get("/api/v1/storage/entries/lookup", {"path": "/secret/plan.txt"}).status_code == 404
    assert stranger_api.get("/api/v1/storage/entries").json()["results"] == []
    # A stranger may have a folder of the same name: it is theirs, and separate.
    services.make_folders(stranger, "/secret")
    assert stranger_api.get("/api/v1/storage/entries", {"path": "/secret"}).json()["results"] == []


def test_an_upload_cannot_target_someone_elses_folder(stranger_api, owned):
    # Folder paths are resolved in the caller's own tree: "/secret" does not exist for the stranger.
    from .fixtures import tus_create

    assert tus_create(stranger_api, 10, "x.txt", folder="/secret").status_code == 404


PAGE_ROUTES = [
    ("get", "/storage/folders/{folder}/", None),
    ("get", "/storage/entries/{file}/download/", None),
    ("post", "/storage/entries/{file}/rename/", {"name": "mine.txt"}),
    ("post", "/storage/entries/{file}/move/", {"folder": "/"}),
    ("post", "/storage/entries/{file}/delete/", {}),
    ("post", "/storage/entries/{folder}/delete/", {}),
    ("post", "/storage/folders/new/", {"parent": "{folder}", "name": "inside"}),
]


@pytest.mark.parametrize(("method", "route", "body"), PAGE_ROUTES)
@pytest.mark.parametrize("persona", ["teammate", "stranger"])
def test_others_get_404_from_every_storage_page(client, request, owned, persona, method, route, body):
    client.force_login(request.getfixturevalue(persona))
    url = route.format(**owned)
    if body is not None:
        body = {k: v.format(**owned) for k, v in body.items()}
        response = client.post(url, body)
    else:
        response = client.get(url)
    assert response.status_code == 404
    assert set(Entry.objects.values_list("path", flat=True)) == {"/secret", "/secret/plan.txt"}


@pytest.mark.parametrize(("method", "route", "body"), PAGE_ROUTES)
def test_the_owner_may_use_every_storage_page(owner_client, owned, method, route, body):
    url = route.format(**owned)
    if body is not None:
        response = owner_client.post(url, {k: v.format(**owned) for k, v in body.items()})
        assert response.status_code == 302
    else:
        assert owner_client.get(url).status_code == 200


def test_anonymous_visitors_are_sent_to_log_in(client, anon_api, owned):
    assert client.get("/storage/")["Location"].startswith("/accounts/login/")
    assert anon_api.get("/api/v1/storage/entries").status_code == 401
    assert anon_api.head(f"/api/v1/storage/uploads/{owned['upload']}", **TUS).status_code == 401
