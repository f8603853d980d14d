"""Bodies a client may send by mistake or on purpose: nested too deeply, not JSON, too large. Each answers 400 in
the caller's error shape — ``{"code", "message"}`` on the API, OpenAI's ``{"error": {…}}`` on /v1 — and writes
nothing."""

import json

import pytest
from django.test import Client

from accounts.models import ApiToken
from core.jsonbody import InvalidJsonBody, parse_json_body
from inference import services as endpoints
from inference.models import EndpointRequest

pytestmark = pytest.mark.django_db

DEEP = "[" * 10_000 + "]" * 10_000  # 20 KB that json.loads cannot follow without running out of stack


def test_a_deeply_nested_api_body_is_a_400_in_the_api_error_shape_and_creates_nothing(owner_api):
    owner_api.raise_request_exception = False
    tokens = ApiToken.objects.count()

    response = owner_api.post("/api/v1/tokens", DEEP, content_type="application/json", HTTP_ACCEPT_LANGUAGE="en")

    assert response.status_code == 400
    assert response.json() == {"code": "parse_error", "message": "The body is not valid JSON: it is nested too deeply."}
    assert ApiToken.objects.count() == tokens


@pytest.mark.parametrize("body", [b'{"name": NaN}', b"\xff\xfe{}", b'{"name": '])
def test_an_api_body_that_is_not_strict_utf8_json_is_a_400_parse_error(owner_api, body):
    response = owner_api.post("/api/v1/tokens", body, content_type="application/json", HTTP_ACCEPT_LANGUAGE="en")

    assert response.status_code == 400
    assert response.json()["code"] == "parse_error"
    assert response.json()["message"].startswith("The body is not valid JSON")


@pytest.mark.parametrize(
    "raw", [DEEP.encode(), b"{" + b'"a":{' * 5000 + b"}" * 5001, b"\xff", b"NaN", b'{"a": Infinity}', b"", b"{"]
)
def test_parse_json_body_refuses_what_is_not_strict_json_with_a_value_error(raw):
    with pytest.raises(InvalidJsonBody) as exc:
        parse_json_body(raw)
    assert isinstance(exc.value, ValueError) and exc.value.message


def test_parse_json_body_reads_ordinary_json():
    raw = '{"model": "m", "messages": [{"role": "user", "content": "你好"}]}'.encode()
    assert parse_json_body(raw) == {"model": "m", "messages": [{"role": "user", "content": "你好"}]}
    assert parse_json_body(b"[1, 2.5, null]") == [1, 2.5, None]


# Bodies over DATA_UPLOAD_MAX_MEMORY_SIZE ---------------------------------------------------------------------------


@pytest.fixture
def small_uploads(settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1024 * 1024  # 1 MB, so that the bodies below stay cheap


def test_an_api_body_over_the_size_limit_is_a_400_in_the_api_error_shape(owner_api, small_uploads):
    owner_api.raise_request_exception = False
    tokens = ApiToken.objects.count()
    body = json.dumps({"name": "x" * (2 * 1024 * 1024), "scope": "read"})

    response = owner_api.post("/api/v1/tokens", body, content_type="application/json", HTTP_ACCEPT_LANGUAGE="en")

    assert response.status_code == 400 and response["Content-Type"] == "application/json"
    assert response.json() == {"code": "request_too_large", "message": "The request body is too large: at most 1 MB."}
    assert ApiToken.objects.count() == tokens


def test_a_v1_body_over_the_size_limit_is_a_400_in_openai_error_shape(owner, deploy, small_uploads):

    key = endpoints.create_key(deploy(owner), name="app")
    client = Client(raise_request_exception=False, HTTP_ACCEPT_LANGUAGE="en")
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "x" * (2 * 1024 * 1024)}]})

    response = client.post(
        "/v1/chat/completions", body, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {key.plaintext}"
    )

    assert response.status_code == 400 and response["Content-Type"] == "application/json"
    assert response.json() == {
        "error": {
            "message": "The request body is too large: at most 1 MB.",
            "type": "invalid_request_error",
            "code": "request_too_large",
        }
    }
    assert not EndpointRequest.objects.filter(status_code=200).exists()


def test_a_page_form_over_the_size_limit_shows_the_error_page_saying_so(owner_client, small_uploads):
    owner_client.raise_request_exception = False
    owner_client.cookies["django_language"] = "en"

    response = owner_client.post("/console/tokens/", {"name": "x" * (2 * 1024 * 1024), "scope": "read"})

    assert response.status_code == 400 and response["Content-Type"].startswith("text/html")
    assert "The request body is too large: at most 1 MB." in response.content.decode()
