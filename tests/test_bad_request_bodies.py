"""Bodies a client may send by mistake or on purpose: nested too deeply, not JSON, too large. Each answers 400 in
the caller's error shape — ``{"code", "message"}`` on the API, OpenAI's ``{"error": {…}}`` on /v1 — and writes
nothing."""

import pytest

from console.jsonbody import InvalidJsonBody, parse_json_body
from console.models import ApiToken

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
