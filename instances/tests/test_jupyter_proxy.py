"""JupyterLab through the console, over real sockets: the console under uvicorn (``console_server``) sends the
owner from ``/instances/<id>/lab/…`` to the lab's own origin (``<id>.<LAB_DOMAIN>``) with a one-time handoff, and
proxies that origin to a fake Jupyter server under uvicorn on a Unix socket, HTTP and websockets alike.

The owner gets through; a stranger and an anonymous visitor get 404; the console's cookies never admit anyone to a
lab, and a lab host serves nothing of the console; the token goes upstream as a header and never comes back; cookies
stay in the lab; another origin (the console's included) cannot write or open a socket; a Jupyter that does not
answer is a 502 page in the user's language; a password change closes the lab.
"""

import hashlib
import json
import re
import shutil
import tempfile
from importlib import import_module
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest
from django.conf import settings
from django.contrib.sessions.models import Session
from django.test import Client
from websockets.exceptions import ConnectionClosed, InvalidStatus

from instances.backends import JupyterServer, get_backend
from instances.jupyter_proxy import _may_hold_token
from tests.asgi_server import ServerThread, browser, lab_browser, lab_host, lab_origin, open_websocket

from .fake_jupyter import STATUS, FakeJupyter


@pytest.fixture
def instance(launch, owner):
    return launch()


@pytest.fixture
def jupyter(instance, monkeypatch, settings):
    """A fake Jupyter on a Unix socket for the owner's instance, and its backend saying it answers there."""
    settings.LAB_AUTH_CACHE_SECONDS = 0  # every request looks ownership up again: a change shows at once
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


@pytest.fixture
def lab(console_server, jupyter, owner, instance):
    """The owner's browser on the instance's lab origin, holding the lab's cookie."""
    client = lab_browser(console_server, owner, instance.public_id)
    yield client
    client.close()


def test_the_console_sends_the_owner_to_the_labs_own_origin_with_a_one_time_handoff_for_this_browser(
    console_server, jupyter, owner, instance
):
    console = browser(console_server, owner)
    host = lab_host(console_server, instance.public_id)
    lab = httpx.Client(base_url=console_server.url, headers={"Host": host})

    # The console sends the owner to the lab's origin, which sets a state cookie and sends the browser back
    start = urlsplit(console.get(f"{jupyter.base_path}tree?path=a%20b").headers["location"])
    assert f"{start.scheme}://{start.netloc}" == lab_origin(console_server, instance.public_id)
    assert start.path == "/_lab/start"
    back = lab.get(f"{start.path}?{start.query}")
    assert back.status_code == 302 and "gpucloud_lab_state" in lab.cookies
    back = urlsplit(back.headers["location"])
    # and the console answers with a handoff bound to that state
    handoff = console.get(f"{back.path}?{back.query}")
    assert handoff.status_code == 302 and jupyter.token not in handoff.headers["location"]
    login = urlsplit(handoff.headers["location"])
    assert login.netloc == host and login.path == "/_lab/login"

    # Another browser (no state cookie: a link someone was sent), or another lab's host, gets nothing from it
    stranger_browser = httpx.Client(base_url=console_server.url, headers={"Host": host})
    assert stranger_browser.get(f"{login.path}?{login.query}").status_code == 404
    elsewhere = httpx.Client(base_url=console_server.url, headers={"Host": f"other.{host}"})
    assert elsewhere.get(f"{login.path}?{login.query}").status_code == 404
    # The browser that began it gets the lab, once, and lands on the page asked for
    entered = lab.get(f"{login.path}?{login.query}")
    assert entered.status_code == 302 and entered.headers["location"] == f"{jupyter.base_path}tree?path=a%20b"
    cookie = next(c for c in entered.headers.get_list("set-cookie") if c.startswith("gpucloud_lab="))
    assert "HttpOnly" in cookie and "Domain" not in cookie and "Path=/" in cookie
    assert lab.get(f"{jupyter.base_path}api/status").json() == STATUS
    replayed = httpx.Client(
        base_url=console_server.url, headers={"Host": host}, cookies={"gpucloud_lab_state": "whatever"}
    )
    assert replayed.get(f"{login.path}?{login.query}").status_code == 404
    assert replayed.get(f"{jupyter.base_path}api/status").status_code == 302  # no lab cookie: back to the console
    # A handoff asked for without the lab's start, or for a path no lab page has, is refused
    assert console.get(f"/instances/{instance.public_id}/lab-handoff/?s=x&p=/etc").status_code == 404
    crlf = f"{jupyter.base_path}x%0d%0aSet-Cookie:%20a=b"
    assert console.get(f"/instances/{instance.public_id}/lab-handoff/?s={'a' * 64}&p={crlf}").status_code == 404


def test_the_owner_reaches_jupyter_and_the_token_goes_as_a_header_only(lab, jupyter):
    response = lab.get(f"{jupyter.base_path}api/status?probe=1%2F2")

    assert response.status_code == 200 and response.json() == STATUS
    seen = jupyter.requests[-1]
    assert seen["path"] == f"{jupyter.base_path}api/status" and seen["query"] == "probe=1%2F2"
    assert seen["headers"]["authorization"] == f"token {jupyter.token}"
    # The lab's cookie is the console's business: the machine never sees it.
    assert "cookie" not in seen["headers"] and seen["headers"]["host"] == "localhost"
    assert jupyter.token not in response.text and jupyter.token not in str(response.headers)


def test_the_lab_page_loses_the_token_and_keeps_jupyters_policy_and_cookies_in_the_lab(lab, jupyter):
    response = lab.get(f"{jupyter.base_path}lab")

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


def test_a_redirect_to_jupyters_own_address_becomes_a_lab_path(lab, jupyter):
    response = lab.get(f"{jupyter.base_path}redirect")

    assert response.status_code == 302 and response.headers["location"] == f"{jupyter.base_path}lab"


def test_strangers_get_404_anonymous_visitors_sign_in_first_and_jupyter_sees_nothing(
    console_server, jupyter, stranger, instance
):
    host = lab_host(console_server, instance.public_id)
    assert browser(console_server, stranger).get(f"{jupyter.base_path}api/status").status_code == 404
    signed_out = browser(console_server).get(f"{jupyter.base_path}api/status")
    assert signed_out.status_code == 302 and "/accounts/login/" in signed_out.headers["location"]
    for user in (stranger, None):
        # On the lab's origin the console's session admits nobody: a page load goes back to the console.
        on_lab = browser(console_server, user)
        on_lab.headers["Host"] = host
        response = on_lab.get(f"{jupyter.base_path}api/status")
        assert response.status_code == 302 and response.headers["location"].endswith(f"{jupyter.base_path}api/status")
        assert on_lab.post(f"{jupyter.base_path}api/echo", content=b"x").status_code == 404
        with pytest.raises(InvalidStatus) as refused:
            open_websocket(
                console_server, f"{jupyter.base_path}api/kernels/k1/channels", user, origin=f"http://{host}", lab=on_lab
            )
        assert refused.value.response.status_code == 404
    assert jupyter.requests == []


def test_one_labs_cookie_opens_no_other_lab(console_server, jupyter, owner, instance, launch):
    other = launch()
    lab = lab_browser(console_server, owner, instance.public_id)
    lab.headers["Host"] = lab_host(console_server, other.public_id)
    assert lab.get(f"/instances/{other.public_id}/lab/api/status").status_code == 302  # no cookie of its own
    assert lab.get(f"{jupyter.base_path}api/status").status_code == 404  # another instance's path on this host


def test_a_lab_host_serves_nothing_of_the_console(lab, jupyter):
    for path in ("/", "/instances/", "/api/v1/instances/", "/admin/", "/static/js/htmx.min.js"):
        assert lab.get(path).status_code == 404, path
    assert jupyter.requests == []


def test_a_password_change_closes_the_lab(lab, jupyter, owner, instance):
    assert lab.get(f"{jupyter.base_path}api/status").status_code == 200
    owner.set_password("a new password 2026")
    owner.save()
    assert lab.get(f"{jupyter.base_path}api/status").status_code == 302  # back to the console, to sign in again
    assert (
        lab.put(
            f"{jupyter.base_path}api/echo", content=b"x", headers={"Origin": f"http://{lab.headers['host']}"}
        ).status_code
        == 404
    )


def test_signing_out_of_the_console_closes_the_lab(lab, jupyter):
    assert lab.get(f"{jupyter.base_path}api/status").status_code == 200
    console = lab.console
    form = console.get("/accounts/logout/")
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form.text).group(1)
    assert console.post("/accounts/logout/", data={"csrfmiddlewaretoken": token}).status_code == 302
    assert lab.get(f"{jupyter.base_path}api/status").status_code == 302
    back = urlsplit(lab.get(f"{jupyter.base_path}lab").headers["location"])  # a page load goes back to the console
    assert "/accounts/login/" in console.get(f"{back.path}?{back.query}").headers["location"]  # which asks to sign in


def test_signing_out_closes_an_open_websocket_too(console_server, lab, jupyter):
    with open_websocket(console_server, f"{jupyter.base_path}api/kernels/k1/channels", lab=lab) as ws:
        ws.send("before")
        assert ws.recv(timeout=10) == "before"
        lab.console.cookies.clear()
        for key in Session.objects.values_list("session_key", flat=True):
            # What signing out does to the console session (the engine's flush: the database row and any cached copy)
            import_module(settings.SESSION_ENGINE).SessionStore(session_key=key).delete()
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv(timeout=10)
    assert closed.value.rcvd.code == 1008


def test_a_websocket_round_trips_text_and_binary_with_the_subprotocol(console_server, lab, jupyter):
    protocol = "v1.kernel.websocket.jupyter.org"
    path = f"{jupyter.base_path}api/kernels/k1/channels?session_id=s1"
    with open_websocket(console_server, path, lab=lab, subprotocols=[protocol]) as ws:
        assert ws.subprotocol == protocol
        ws.send("hello 你好")
        assert ws.recv(timeout=10) == "hello 你好"
        payload = bytes(range(256)) * 1000
        ws.send(payload)
        assert ws.recv(timeout=10) == payload

    handshake = next(r for r in jupyter.requests if r["type"] == "websocket")
    assert handshake["query"] == "session_id=s1"
    assert handshake["headers"]["authorization"] == f"token {jupyter.token}" and "cookie" not in handshake["headers"]


def test_jupyter_closing_a_websocket_closes_the_browsers_with_its_code(console_server, lab, jupyter):
    with open_websocket(console_server, f"{jupyter.base_path}api/terminals/websocket/1", lab=lab) as ws:
        ws.send("close please")
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv(timeout=10)
    assert closed.value.rcvd.code == 4001


def test_another_origin_can_neither_open_a_socket_nor_write(console_server, lab, jupyter, owner):
    # The console's own origin is another origin for a lab, as any site is.
    for origin in ("https://evil.example", console_server.url):
        with pytest.raises(InvalidStatus) as refused:
            open_websocket(console_server, f"{jupyter.base_path}api/kernels/k1/channels", lab=lab, origin=origin)
        assert refused.value.response.status_code == 403
    for origin in ("https://evil.example", console_server.url, None):
        headers = {"Origin": origin} if origin else {}
        assert lab.post(f"{jupyter.base_path}api/echo", content=b"x", headers=headers).status_code == 403
    assert [r for r in jupyter.requests if r["path"].endswith("api/echo")] == []
    # And the console no longer opens a lab's sockets on its own origin.
    with pytest.raises(InvalidStatus) as refused:
        open_websocket(console_server, f"{jupyter.base_path}api/kernels/k1/channels", owner)
    assert refused.value.response.status_code == 404


def test_a_same_origin_upload_streams_through_whatever_its_size(lab, jupyter):
    # Larger than Django's DATA_UPLOAD_MAX_MEMORY_SIZE (2.5 MB): the lab's uploads are not the console's forms.
    body = bytes(range(256)) * (12 * 1024)

    response = lab.put(
        f"{jupyter.base_path}api/echo", content=body, headers={"Origin": f"http://{lab.headers['host']}"}
    )

    assert response.status_code == 200
    assert response.json() == {"length": len(body), "sha256": hashlib.sha256(body).hexdigest()}


def test_a_download_streams_with_its_length(lab, jupyter):
    size = 3 * 1024 * 1024 + 17
    with lab.stream("GET", f"{jupyter.base_path}files/{size}") as response:
        assert response.status_code == 200 and response.headers["content-length"] == str(size)
        assert sum(len(chunk) for chunk in response.iter_bytes()) == size


def test_a_jupyter_that_does_not_answer_is_a_502_page_in_the_users_language(console_server, jupyter, owner, instance):
    chinese = lab_browser(console_server, owner, instance.public_id)
    english = lab_browser(console_server, owner, instance.public_id, language="en")
    jupyter.thread.__exit__(None, None, None)  # Jupyter stops; its socket file goes with it

    response = chinese.get(f"{jupyter.base_path}api/status")
    assert response.status_code == 502
    assert "JupyterLab" in response.text and "没有响应" in response.text  # the console's language: Chinese
    assert f"/instances/{instance.public_id}/" in response.text  # a way back to the instance's page
    assert "is not answering" in english.get(f"{jupyter.base_path}lab").text
    with pytest.raises(InvalidStatus) as refused:
        open_websocket(console_server, f"{jupyter.base_path}api/kernels/k1/channels", lab=chinese)
    assert refused.value.response.status_code == 502


def test_an_instance_without_jupyter_answers_503_and_other_websockets_404(console_server, instance, owner):
    # The simulated backend runs no machine, so no JupyterLab.
    response = browser(console_server, owner).get(f"/instances/{instance.public_id}/lab/api/status")
    assert response.status_code == 503 and "JupyterLab" in response.text
    with pytest.raises(InvalidStatus) as refused:
        open_websocket(console_server, "/ws/anything", owner)
    assert refused.value.response.status_code == 404


def test_the_console_answers_writes_to_a_lab_path_with_405(owner, instance):
    client = Client()
    client.force_login(owner)
    assert client.post(f"/instances/{instance.public_id}/lab/api/contents").status_code == 405


def test_the_token_is_cut_from_jupyters_own_text_but_user_files_download_unscanned():

    server = JupyterServer(token="t", base_path="/instances/abc/lab/", socket="/tmp/s")
    assert _may_hold_token("/instances/abc/lab/tree", server, "text/html; charset=UTF-8")
    assert _may_hold_token("/instances/abc/lab/api/contents", server, "application/json")
    assert not _may_hold_token("/instances/abc/lab/api/contents", server, "image/png")
    assert not _may_hold_token("/instances/abc/lab/files/data.csv", server, "text/csv")


def test_from_another_machine_the_lab_needs_a_lab_domain_and_says_so(owner, instance, jupyter, settings):
    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "10.0.0.5"]
    client = Client(HTTP_HOST="10.0.0.5:8000")
    client.force_login(owner)
    client.cookies["django_language"] = "en"

    response = client.get(f"/instances/{instance.public_id}/lab/")

    assert response.status_code == 503 and "LAB_DOMAIN" in response.content.decode()
    settings.LAB_DOMAIN = "lab.example.net"
    response = client.get(f"/instances/{instance.public_id}/lab/")
    assert response.status_code == 302
    assert response["Location"].startswith(f"http://{instance.public_id}.lab.example.net:8000/_lab/start?r=")


def test_the_lab_survives_a_jupyter_restart_on_the_same_socket(lab, jupyter):
    for _ in range(5):
        assert lab.get(f"{jupyter.base_path}api/status").status_code == 200
    jupyter.thread.__exit__(None, None, None)
    with ServerThread(jupyter, uds=jupyter.socket):  # JupyterLab back on the same socket, as after a restart
        assert lab.get(f"{jupyter.base_path}api/status").json() == STATUS
    assert lab.get(f"{jupyter.base_path}api/status").status_code == 502


def test_a_lab_whose_machine_stopped_says_so_at_once_despite_the_kept_look_up(
    lab, jupyter, instance, monkeypatch, settings
):
    settings.LAB_AUTH_CACHE_SECONDS = 60
    assert lab.get(f"{jupyter.base_path}api/status").status_code == 200  # looked up and kept for a minute
    jupyter.thread.__exit__(None, None, None)
    monkeypatch.setattr(get_backend(instance.backend_name), "jupyter", lambda inst: None)  # the machine stopped

    response = lab.get(f"{jupyter.base_path}api/status")

    assert response.status_code == 503 and "此实例上没有运行 JupyterLab" in response.text
