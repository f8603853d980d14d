"""API tokens: issued once, stored hashed, scoped, revocable, owned."""

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from accounts import services
from accounts.models import ApiToken
from core import keys
from core.errors import ServiceError

pytestmark = pytest.mark.django_db


def bearer(token: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client


def test_a_token_is_shown_once_and_only_its_hash_is_stored(owner):
    issued = services.create_api_token(owner, name="laptop", scope="read")
    assert issued.plaintext.startswith(issued.token.prefix + "_")
    stored = ApiToken.objects.get(pk=issued.token.pk)
    assert issued.plaintext not in {stored.token_hash, stored.prefix, stored.name}
    assert len(stored.token_hash) == 64


def test_a_valid_token_reads_the_owners_profile_and_records_last_use(owner):
    issued = services.create_api_token(owner, name="cli", scope="read")
    response = bearer(issued.plaintext).get("/api/v1/me")
    assert response.status_code == 200
    assert response.json()["email"] == owner.email
    issued.token.refresh_from_db()
    assert issued.token.last_used_at is not None


def test_a_wrong_secret_with_a_real_prefix_is_refused(owner):
    issued = services.create_api_token(owner, name="cli", scope="read")
    forged = issued.token.prefix + "_" + "x" * 43
    response = bearer(forged).get("/api/v1/me")
    assert response.status_code == 401
    assert response.json()["code"] == "authentication_failed"
    assert response["WWW-Authenticate"].startswith("Bearer")


def test_a_revoked_token_stops_working(owner):
    issued = services.create_api_token(owner, name="ci", scope="read_write")
    services.revoke_api_token(owner, issued.token.public_id)
    assert bearer(issued.plaintext).get("/api/v1/me").status_code == 401


def test_a_read_only_token_cannot_change_anything(owner):
    issued = services.create_api_token(owner, name="ro", scope="read")
    response = bearer(issued.plaintext).post("/api/v1/tokens", {"name": "x", "scope": "read"}, format="json")
    assert response.status_code == 403
    assert "read-only" in response.json()["message"] or "只读" in response.json()["message"]
    assert ApiToken.objects.filter(user=owner).count() == 1


def test_tokens_can_be_created_listed_and_revoked_through_the_api(owner_api, owner):
    created = owner_api.post("/api/v1/tokens", {"name": "deploy", "scope": "read"}, format="json")
    assert created.status_code == 201
    body = created.json()
    assert body["token"].startswith("gpc_") and body["scope"] == "read"
    listed = owner_api.get("/api/v1/tokens").json()["results"]
    assert {t["name"] for t in listed} == {"tests", "deploy"}
    assert all("token" not in t for t in listed)  # the secret is never listed
    revoked = owner_api.delete(f"/api/v1/tokens/{body['id']}")
    assert revoked.status_code == 200 and revoked.json()["active"] is False
    assert bearer(body["token"]).get("/api/v1/me").status_code == 401


@pytest.mark.parametrize(
    "payload, field",
    [({"scope": "read"}, "name"), ({"name": "x", "scope": "admin"}, "scope"), ({"name": "y" * 65}, "name")],
)
def test_bad_token_input_is_a_400_with_a_field_error(owner_api, payload, field):
    response = owner_api.post("/api/v1/tokens", payload, format="json")
    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "invalid" and field in body["errors"] and body["message"]


def test_a_stranger_cannot_see_or_revoke_the_owners_token(owner, stranger_api):
    issued = services.create_api_token(owner, name="secret-project", scope="read_write")
    url = f"/api/v1/tokens/{issued.token.public_id}"
    assert stranger_api.get(url).status_code == 404
    assert stranger_api.delete(url).status_code == 404
    assert "secret-project" not in str(stranger_api.get("/api/v1/tokens").json())
    issued.token.refresh_from_db()
    assert issued.token.revoked_at is None


def test_a_stranger_cannot_revoke_the_owners_token_from_the_page(owner, stranger, client):
    issued = services.create_api_token(owner, name="keep", scope="read")
    client.force_login(stranger)
    client.post(reverse("console:revoke-token", args=[issued.token.public_id]))
    issued.token.refresh_from_db()
    assert issued.token.revoked_at is None


def test_the_tokens_page_shows_the_secret_once_and_lists_tokens(owner_client):
    response = owner_client.post(reverse("console:tokens"), {"name": "notebook", "scope": "read"})
    assert response.status_code == 200
    token = ApiToken.objects.get(name="notebook")
    secret = response.context["issued"].plaintext
    assert secret in response.content.decode()
    again = owner_client.get(reverse("console:tokens")).content.decode()
    assert "notebook" in again and secret not in again and token.prefix in again


def test_the_tokens_page_explains_a_missing_name_in_chinese_and_english(owner_client):
    response = owner_client.post(reverse("console:tokens"), {"name": "  ", "scope": "read"})
    assert response.status_code == 400
    assert "请为令牌起一个名字" in response.content.decode()
    owner_client.cookies["django_language"] = "en"
    response = owner_client.post(reverse("console:tokens"), {"name": "", "scope": "bogus"})
    assert response.status_code == 400
    html = response.content.decode()
    assert "Give the token a name." in html and "Choose read or read and write." in html
    assert not ApiToken.objects.exists()


def test_the_tokens_page_returns_only_the_panel_to_htmx(owner_client):
    response = owner_client.post(
        reverse("console:tokens"), {"name": "htmx", "scope": "read_write"}, HTTP_HX_REQUEST="true"
    )
    html = response.content.decode()
    assert response.status_code == 200 and 'id="token-panel"' in html and "<html" not in html


def test_token_names_are_required_by_the_service_too(owner):
    with pytest.raises(ServiceError):
        services.create_api_token(owner, name=" ", scope="read")


def test_a_prefix_collision_draws_another_token(owner, monkeypatch):

    draws = iter(["aaaaaaaa", "aaaaaaaa", "bbbbbbbb"])
    monkeypatch.setattr(keys.secrets, "token_hex", lambda n: next(draws))
    first = services.create_api_token(owner, name="first", scope="read")
    second = services.create_api_token(owner, name="second", scope="read")
    assert (first.token.prefix, second.token.prefix) == ("gpc_aaaaaaaa", "gpc_bbbbbbbb")
    assert services.authenticate_token(second.plaintext).pk == second.token.pk
    assert services.authenticate_token(first.plaintext).pk == first.token.pk
