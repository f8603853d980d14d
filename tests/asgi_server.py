"""Real ASGI servers for tests and benchmarks: uvicorn in a thread, on a Unix socket or a free TCP port.

``console_server`` serves the console itself (``config.asgi:application``: Django plus the labs) on the test
database, committed (``transactional_db``) so the server's threads see what the test made. ``browser`` and
``open_websocket`` talk to it as a browser does, with a user's session cookie (``login_cookies``) or none;
``lab_browser`` enters an instance's lab as a browser does (through the console's handoff to the lab's own origin),
and ``open_websocket(..., lab=client)`` opens a websocket there with that lab's cookie.
"""

import socket
import threading
import time
from urllib.parse import urlsplit

import httpx
import pytest
import uvicorn
from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections
from django.test import Client
from websockets.sync.client import ClientConnection, connect

from config.asgi import application


class ServerThread:
    """``with ServerThread(app, uds=path) as server:`` serves ``app`` until the block ends (``server.url`` on TCP)."""

    def __init__(self, app, *, uds: str = ""):
        self.uds = uds
        self.sockets: list[socket.socket] = []
        self.url = ""
        if not uds:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(("127.0.0.1", 0))  # bound here, so no other process can take the port before uvicorn starts
            self.sockets.append(sock)
            self.url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        config = uvicorn.Config(app, uds=uds or None, log_level="warning", lifespan="on")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": self.sockets or None}, daemon=True)

    def __enter__(self):
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.01)
        return self

    def __exit__(self, *exc):
        self.server.should_exit = True
        self.thread.join(timeout=10)
        for sock in self.sockets:
            sock.close()


@pytest.fixture
def console_server(transactional_db):
    """The console under uvicorn on 127.0.0.1 (``console_server.url``), as ``make run`` serves it."""

    # As config.asgi has it in the web process: each request's thread closes its connection when the request ends
    # (else PostgreSQL keeps them, and the test database cannot be dropped).
    database = connections.settings[DEFAULT_DB_ALIAS]
    kept = database.get("CONN_MAX_AGE", 0)
    database["CONN_MAX_AGE"] = 0
    try:
        with ServerThread(application) as server:
            yield server
    finally:
        database["CONN_MAX_AGE"] = kept


def login_cookies(user) -> dict[str, str]:
    """The cookies a browser holds once ``user`` has logged in."""
    client = Client()
    client.force_login(user)
    return {settings.SESSION_COOKIE_NAME: client.cookies[settings.SESSION_COOKIE_NAME].value}


def browser(server: ServerThread, user=None) -> httpx.Client:
    """An HTTP client for ``server``, logged in as ``user`` (anonymous without one); it follows no redirect."""
    cookies = login_cookies(user) if user else {}
    return httpx.Client(base_url=server.url, cookies=cookies, follow_redirects=False, timeout=30)


def lab_host(server: ServerThread, public_id) -> str:
    """The ``Host`` of an instance's lab beside ``server``: its own name on the lab domain, on the console's port."""
    return f"{public_id}.{settings.LAB_DOMAIN}:{urlsplit(server.url).port}"


def lab_browser(server: ServerThread, user, public_id, *, language: str = "") -> httpx.Client:
    """An HTTP client on ``public_id``'s lab origin holding the lab's cookie, got as a browser gets it: ``user``
    opens the lab on the console, and the browser goes to the lab's origin and back once (the state that binds the
    handoff to it) before the lab takes the handoff. (The clients connect to the console's address and name the
    host in the ``Host`` header: ``*.localhost`` resolves to this machine in browsers, not in every resolver.)"""
    console = browser(server, user)
    if language:
        console.cookies.set(settings.LANGUAGE_COOKIE_NAME, language)
    lab = httpx.Client(base_url=server.url, headers={"Host": lab_host(server, public_id)}, timeout=30)
    response = console.get(f"/instances/{public_id}/lab/")
    for _step in range(3):  # to the lab's start, back to the console's handoff, to the lab's login
        assert response.status_code == 302, response.text
        location = urlsplit(response.headers["location"])
        client = lab if location.netloc == lab.headers["host"] else console
        response = client.get(f"{location.path}?{location.query}")
    assert response.status_code == 302 and "gpucloud_lab" in lab.cookies, response.text
    lab.console = console  # the same browser on the console's origin (to sign out, say)
    return lab


def lab_origin(server: ServerThread, public_id) -> str:
    return f"http://{lab_host(server, public_id)}"


def open_websocket(
    server: ServerThread, path: str, user=None, *, origin: str = "", lab: httpx.Client | None = None, **options
) -> ClientConnection:
    """A websocket to ``server`` as a page of its own origin (or ``origin``) opens it: with ``user``'s session on
    the console, or on a lab's origin with the cookie ``lab`` (a ``lab_browser``) holds."""
    if lab is not None:
        host = lab.headers["host"]
        cookies = dict(lab.cookies)
        origin = origin or f"http://{host}"
    else:
        host = ""
        cookies = login_cookies(user) if user else {}
    headers = {"Cookie": "; ".join(f"{name}={value}" for name, value in cookies.items())} if cookies else {}
    uri = server.url.replace("http", "ws", 1) + path
    if host:  # the lab's name in the URI (and so in Host), over a socket to the console's address
        address = urlsplit(server.url)
        options["sock"] = socket.create_connection((address.hostname, address.port), timeout=10)
        uri = f"ws://{host}{path}"
    return connect(uri, origin=origin or server.url, additional_headers=headers, open_timeout=10, **options)
