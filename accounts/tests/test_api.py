"""The API's contract: JSON errors in the request's language, auth, OpenAPI docs served locally."""

import pytest

pytestmark = pytest.mark.django_db


def test_an_anonymous_request_gets_401_json_in_the_requested_language(anon_api):
    english = anon_api.get("/api/v1/me", HTTP_ACCEPT_LANGUAGE="en")
    assert english.status_code == 401
    assert english.json() == {
        "code": "not_authenticated",
        "message": "Authentication credentials were not provided.",
    }
    chinese = anon_api.get("/api/v1/me", HTTP_ACCEPT_LANGUAGE="zh-CN")
    assert chinese.status_code == 401 and chinese.json()["message"] == "身份认证信息未提供。"


def test_an_unknown_api_path_is_a_404_json(owner_api):
    response = owner_api.get("/api/v1/no-such-thing", HTTP_ACCEPT_LANGUAGE="en")
    assert response.status_code == 404
    assert response.json()["code"] == "not_found"


def test_a_malformed_authorization_header_is_a_401_json(anon_api):
    anon_api.credentials(HTTP_AUTHORIZATION="Bearer")
    response = anon_api.get("/api/v1/me")
    assert response.status_code == 401 and response.json()["code"] == "authentication_failed"


def test_me_describes_the_caller(owner_api, owner):
    body = owner_api.get("/api/v1/me", HTTP_ACCEPT_LANGUAGE="en").json()
    assert body["email"] == owner.email and body["email_verified"] is True
    assert body["id"] == str(owner.public_id) and body["language"] == "en"


def test_a_browser_session_can_use_the_api(owner_client):
    response = owner_client.get("/api/v1/me", HTTP_ACCEPT="application/json")
    assert response.status_code == 200


def test_the_openapi_schema_and_docs_are_served_without_a_cdn(client):
    schema = client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert schema.status_code == 200
    assert "/api/v1/me" in schema.json()["paths"]
    docs = client.get("/api/docs/").content.decode()
    assert "swagger-ui" in docs
    assert "cdn" not in docs.lower() and "unpkg" not in docs.lower()


def test_an_unknown_page_is_a_friendly_404_page(client):
    response = client.get("/no-such-page/")
    assert response.status_code == 404
    assert "<html" in response.content.decode()
