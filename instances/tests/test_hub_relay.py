"""The agent's hub relay lets a machine with no network reach the hub's Hugging Face API and nothing else of the
console: every request is read strictly and rebuilt, so no second request can ride inside the first."""

import pytest

from agent.gpucloud_agent import BadRequest, hub_request_allowed, parse_request

LFS = "a" * 64


@pytest.mark.parametrize(
    "target",
    [
        "/demo/tiny/resolve/main/config.json",
        "/datasets/demo/d/resolve/main/x.csv",
        "/api/models/demo/tiny",
        "/api/models/demo/tiny/revision/main",
        "/api/datasets/demo/d/tree/main/sub?recursive=1",
        "/api/repos/create",
        "/api/validate-yaml",
        "/api/models/demo/tiny/preupload/main",
        "/api/models/demo/tiny/commit/main",
        "/demo/tiny.git/info/lfs/objects/batch",
        f"/hub-lfs/{LFS}?ticket=t",
        f"/hub-lfs/{LFS}/verify",
        # what today's huggingface_hub adds: whoami, lists, deletion, settings, and Xet uploads
        "/api/whoami-v2",
        "/api/models?author=demo&limit=5",
        "/api/datasets",
        "/api/repos/delete",
        "/api/models/demo/tiny/settings",
        "/api/models/demo/tiny/xet-write-token/main",
        "/hub-xet/v1/shards",
        f"/hub-xet/v1/xorbs/default/{LFS}",
        f"/hub-xet/v1/xorb-grants/default/{LFS}",
        f"/hub-xet/v1/chunks/default-merkledb/{LFS}",
    ],
)
def test_the_hubs_addresses_pass(target):
    assert hub_request_allowed("GET", target)


@pytest.mark.parametrize(
    "target",
    [
        "/billing/",
        "/instances/",
        "/api/v1/instances",
        "/api/v1/resolve/x/y",
        "/v1/chat/resolve/completions",
        "/api/schema/",
        "/api/models/../../billing/",
        "/api/models/demo/%2e%2e/x",
        "http://console/billing/",
        "/instances/abc/resolve/main/x",
        "/api/models/demo/tiny/commit/main/extra",
        "/ops/hub/",
        "/hub/demo/tiny",
        "/accounts/login/",
        "/demo/tiny/resolve/main/a%00b",
        "/api/modelsx",
        "/api/v1/whoami-v2",
        "/hub-xet/v1/xorbs/default/../x",
        "/hub-xet/v1/reconstructions/x",
        "/api/models/demo/tiny/settings/x",
    ],
)
def test_everything_else_of_the_console_is_refused(target):
    assert not hub_request_allowed("GET", target)


@pytest.mark.parametrize(
    "head",
    [
        b"GET /a/b/resolve/main/x HTTP/1.1\r\nHost: x\r\nX: y\n",  # a bare LF: a second request would follow
        b"GET /a/b/resolve/main/x HTTP/1.1\r\nHost: x\r\n folded: y",
        b"POST /api/models/a/b/commit/main HTTP/1.1\r\nTransfer-Encoding: chunked",
        b"POST /api/models/a/b/commit/main HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 50",
        b"GET /a/b/resolve/main/x HTTP/1.1\r\nBad Header: y",
        b"GET /a/b/resolve/main/x\r\nHost: x",
        "GET /a/b/resolve/main/\u00e9 HTTP/1.1".encode(),
    ],
)
def test_malformed_or_smuggling_requests_are_refused(head):
    with pytest.raises(BadRequest):
        parse_request(head)


def test_a_request_is_rebuilt_without_cookies_or_claims_about_the_caller():
    method, target, headers, length = parse_request(
        b"PUT /hub-lfs/" + LFS.encode() + b"?ticket=t HTTP/1.1\r\nHost: evil\r\nCookie: sessionid=s\r\n"
        b"X-Forwarded-For: 10.0.0.1\r\nAuthorization: Bearer gpc_x\r\nContent-Length: 12"
    )
    assert (method, length) == ("PUT", 12)
    assert headers == [("Authorization", "Bearer gpc_x")]
