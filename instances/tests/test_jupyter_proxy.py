"""JupyterLab through the console, over real sockets: the console under uvicorn (``console_server``) proxies
``/instances/<id>/lab/…`` to a fake Jupyter server under uvicorn on a Unix socket, HTTP and websockets alike.

The owner gets through; a stranger and an anonymous visitor get 404; the token goes upstream as a header and never
comes back; cookies stay in the lab; another origin cannot write or open a socket; a Jupyter that does not answer
is a 502 page.
"""

import hashlib
import json
import shutil
import tempfile
from pathlib import Path

import pytest
from asgiref.sync import async_to_sync
from django.test import Client
from websockets.exceptions import ConnectionClosed, InvalidStatus

from instances.backends import JupyterServer, get_backend
from tests.asgi_server import ServerThread, browser, open_websocket

from .fake_jupyter import STATUS, FakeJupyter


@pytest.fixture
def instance(launch, owner):
    return launch()


@pytest.fixture
def jupyter(instance, monkeypatch):
    """A fake Jupyter on a Unix socket for the owner's instance, and its backend saying it answers there."""
    folder = Path(tempfile.mkdtemp(prefix="jl-", dir="/tmp"))  # a short path: Unix socket paths stop at 107 bytes
    fake = FakeJupyter(f"/instances/{instance.public_id}/lab/")
    fake.socket = str(folder / "jupyter.sock")
    server = JupyterServer(token=fake.token, base_path=fake.base_path, socket=fake.socket)
    backend = get_backend(instance.backend_name)
    monkeypatch.setattr(backend, "jupyter", lambda inst: server if inst.pk == instance.pk else None)
    fake.thread = ServerThread(fake, uds=fake.socket)
    with fake.thread:
        yield fake
    shutil.rmtree(folder, ignore_errors=True)


def test_the_owner_reaches_jupyter_and_the_token_goes_as_a_header_only(console_server, jupyter, owner):
    response = browser(console_server, owner).get(f"{jupyter.base_path}api/status?probe=1%2F2")

    assert response.status_code == 200 and response.json() == STATUS
    seen = jupyter.requests[-1]
    assert seen["path"] == f"{jupyter.base_path}api/status" and seen["query"] == "probe=1%2F2"
    assert seen["headers"]["authorization"] == f"token {jupyter.token}"
    # The browser's session cookie is the console's: the machine never sees it.
    assert "cookie" not in seen["headers"] and seen["headers"]["host"] == "localhost"
    assert jupyter.token not in response.text and jupyter.token not in str(response.headers)


def test_the_lab_page_loses_the_token_and_keeps_jupyters_policy_and_cookies_in_the_lab(console_server, jupyter, owner):
    response = browser(console_server, owner).get(f"{jupyter.base_path}lab")

    assert response.status_code == 200 and "JupyterLab" in response.text
    assert jupyter.token not in response.text
    config = json.loads(response.text.split('type="application/json">')[1].split("</script>")[0])
    assert config["token"] == "" and config["baseUrl"] == jupyter.base_path
    assert response.headers["content-security-policy"].startswith("frame-ancestors 'self'")
    assert response.headers["x-frame-options"] == "SAMEORIGIN"
    assert "access-control-allow-origin" not in response.headers
    assert response.headers.get("strict-transport-security") != "max-age=0"
    cookies = response.headers.get_list("set-cookie")
    assert any(c.startswith("_xsrf=") and f"Path={jupyter.base_path}" in c for c in cookies), cookies
    assert not any("Domain=" in c or "Path=/;" in c or "from-the-machine" in c for c in cookies), cookies


def test_a_redirect_to_jupyters_own_address_becomes_a_console_path(console_server, jupyter, owner):
    response = browser(console_server, owner).get(f"{jupyter.base_path}redirect")

    assert response.status_code == 302 and response.headers["location"] == f"{jupyter.base_path}lab"


def test_strangers_and_anonymous_visitors_get_404_and_jupyter_sees_nothing(console_server, jupyter, stranger):
    for user in (stranger, None):
        assert browser(console_server, user).get(f"{jupyter.base_path}api/status").status_code == 404
        with pytest.raises(InvalidStatus) as refused:
            open_websocket(console_server, f"{jupyter.base_path}api/kernels/k1/channels", user)
        assert refused.value.response.status_code == 404
    assert jupyter.requests == []


def test_a_websocket_round_trips_text_and_binary_with_the_subprotocol(console_server, jupyter, owner):
    protocol = "v1.kernel.websocket.jupyter.org"
    path = f"{jupyter.base_path}api/kernels/k1/channels?session_id=s1"
    with open_websocket(console_server, path, owner, subprotocols=[protocol]) as ws:
        assert ws.subprotocol == protocol
        ws.send("hello 你好")
        assert ws.recv(timeout=10) == "hello 你好"
        payload = bytes(range(256)) * 1000
        ws.send(payload)
        assert ws.recv(timeout=10) == payload

    handshake = next(r for r in jupyter.requests if r["type"] == "websocket")
    assert handshake["query"] == "session_id=s1"
    assert handshake["headers"]["authorization"] == f"token {jupyter.token}" and "cookie" not in handshake["headers"]


def test_jupyter_closing_a_websocket_closes_the_browsers_with_its_code(console_server, jupyter, owner):
    with open_websocket(console_server, f"{jupyter.base_path}api/terminals/websocket/1", owner) as ws:
        ws.send("close please")
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv(timeout=10)
    assert closed.value.rcvd.code == 4001


def test_another_origin_can_neither_open_a_socket_nor_write(console_server, jupyter, owner):
    with pytest.raises(InvalidStatus) as refused:
        open_websocket(
            console_server, f"{jupyter.base_path}api/kernels/k1/channels", owner, origin="https://evil.example"
        )
    assert refused.value.response.status_code == 403

    client = browser(console_server, owner)
    for origin in ("https://evil.example", None):
        headers = {"Origin": origin} if origin else {}
        assert client.post(f"{jupyter.base_path}api/echo", content=b"x", headers=headers).status_code == 403
    assert [r for r in jupyter.requests if r["path"].endswith("api/echo")] == []


def test_a_same_origin_upload_streams_through_whatever_its_size(console_server, jupyter, owner):
    # Larger than Django's DATA_UPLOAD_MAX_MEMORY_SIZE (2.5 MB): the lab's uploads are not the console's forms.
    body = bytes(range(256)) * (12 * 1024)
    client = browser(console_server, owner)

    response = client.put(f"{jupyter.base_path}api/echo", content=body, headers={"Origin": console_server.url})

    assert response.status_code == 200
    assert response.json() == {"length": len(body), "sha256": hashlib.sha256(body).hexdigest()}


def test_a_download_streams_with_its_length(console_server, jupyter, owner):
    size = 3 * 1024 * 1024 + 17
    with browser(console_server, owner).stream("GET", f"{jupyter.base_path}files/{size}") as response:
        assert response.status_code == 200 and response.headers["content-length"] == str(size)
        assert sum(len(chunk) for chunk in response.iter_bytes()) == size


def test_a_jupyter_that_does_not_answer_is_a_502_page(console_server, jupyter, owner):
    jupyter.thread.__exit__(None, None, None)  # Jupyter stops; its socket file goes with it
    client = browser(console_server, owner)

    response = client.get(f"{jupyter.base_path}api/status")
    assert response.status_code == 502
    assert "JupyterLab" in response.text and "没有响应" in response.text  # the console's language: Chinese
    client.cookies.set("django_language", "en")
    assert "is not answering" in client.get(f"{jupyter.base_path}lab").text
    with pytest.raises(InvalidStatus) as refused:
        open_websocket(console_server, f"{jupyter.base_path}api/kernels/k1/channels", owner)
    assert refused.value.response.status_code == 502


def test_an_instance_without_jupyter_answers_503_and_other_websockets_404(console_server, instance, owner):
    # The simulated backend runs no machine, so no JupyterLab.
    response = browser(console_server, owner).get(f"/instances/{instance.public_id}/lab/api/status")
    assert response.status_code == 503 and "JupyterLab" in response.text
    with pytest.raises(InvalidStatus) as refused:
        open_websocket(console_server, "/ws/anything", owner)
    assert refused.value.response.status_code == 404


def test_under_wsgi_the_answer_is_read_whole_and_still_right(jupyter, owner):
    # The test client is WSGI: the view reads Jupyter's answer before returning, as gunicorn or runserver would need.
    # (No console_server here, so this test runs with the database tests, before any browser test's event loop.)
    client = Client()
    client.force_login(owner)

    response = client.get(f"{jupyter.base_path}lab")

    body = async_to_sync(_read)(response)
    assert response.status_code == 200 and b"JupyterLab" in body and jupyter.token.encode() not in body


async def _read(response) -> bytes:
    return b"".join([chunk async for chunk in response.streaming_content])


def test_the_token_is_cut_from_jupyters_own_text_but_user_files_download_unscanned():
    from types import SimpleNamespace

    from instances.jupyter_proxy import _may_hold_token

    server = JupyterServer(token="t", base_path="/instances/abc/lab/", socket="/tmp/s")
    page = SimpleNamespace(path="/instances/abc/lab/tree")
    listing = SimpleNamespace(path="/instances/abc/lab/api/contents")
    download = SimpleNamespace(path="/instances/abc/lab/files/data.csv")
    assert _may_hold_token(page, server, "text/html; charset=UTF-8")
    assert _may_hold_token(listing, server, "application/json")
    assert not _may_hold_token(listing, server, "image/png")
    assert not _may_hold_token(download, server, "text/csv")
