"""The only way skopeo reaches the network: a small HTTP proxy in the worker that checks every destination.

A registry answers with redirects (a blob on its storage) and names the server that issues its tokens, and skopeo
follows both: a registry on a public address could send the worker to the console's database or a cloud's metadata
service. skopeo runs with ``HTTP_PROXY`` and ``HTTPS_PROXY`` naming this proxy, on the loopback, for the length of
one command. For each request (``CONNECT host:port`` for https, an absolute URL for plain http) the proxy resolves the
host, checks every address with the registries' rule (``references.allowed``: public only, the loopback only where
``IMAGE_IMPORT_ALLOW_LOOPBACK`` allows it), and connects to the address it checked, so a name that resolves
differently a moment later (DNS rebinding) changes nothing. A refused destination gets a 403 and is remembered, so the
import can say why it failed; nothing is sent to it.

Go's HTTP client (skopeo's) never uses a proxy for a literal loopback address or ``localhost``: those it reaches
directly. So skopeo runs in a network namespace of its own (``bwrap --unshare-net``) whose loopback holds only a
relay to this proxy's unix socket (``egress_relay``): a redirect to ``127.0.0.1`` finds nothing there. The one
exception is a registry on the host's loopback allowed by ``IMAGE_IMPORT_ALLOW_LOOPBACK`` (the tests'), which only
the host's network reaches; a host without bubblewrap runs skopeo on its network with the proxy alone.
"""

import os
import select
import socket
import socketserver
import sys
import tempfile
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from . import references

BWRAP = "/usr/bin/bwrap"
RELAY = Path(__file__).with_name("egress_relay.py")
RELAY_PORT = 3128  # on the namespace's own loopback
MAX_HEAD = 16 * 1024
CONNECT_TIMEOUT = 30
IDLE_TIMEOUT = 300
CHUNK = 64 * 1024


class Refused(Exception):
    """The destination is not one skopeo may reach."""


def connect(address: str, port: int) -> socket.socket:
    """A connection to an address that was checked (the tests watch this: nothing else opens one)."""
    return socket.create_connection((address, port), timeout=CONNECT_TIMEOUT)


def _checked(host: str, port: int) -> str:
    """The address to connect to for ``host``: every address it resolves to must be allowed."""
    if not 0 < port < 65536:
        raise Refused(host)
    try:
        found = references.addresses(host.strip("[]"))
    except references.RegistryRefused as exc:
        raise Refused(host) from exc
    if not found or not all(references.allowed(a) for a in found):
        raise Refused(host)
    return str(sorted(found, key=lambda a: (a.version, int(a)))[0])


class _Handler(socketserver.BaseRequestHandler):
    def handle(self):
        self.request.settimeout(IDLE_TIMEOUT)
        head, rest = self._read_head()
        if head is None:
            return
        lines = head.split(b"\r\n")
        try:
            method, target, version = lines[0].decode("latin-1").split(" ", 2)
        except ValueError:
            return self._answer(400, "Bad Request")
        try:
            if method == "CONNECT":
                host, _sep, port = target.rpartition(":")
                upstream = connect(self._check(host, int(port)), int(port))
                self.request.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            else:
                upstream = self._forward(method, target, version, lines[1:], rest)
        except Refused as exc:
            return self._answer(403, f"gpucloud refused {exc.args[0][:200]}: not a public address")
        except (OSError, ValueError):
            return self._answer(502, "Bad Gateway")
        with upstream:
            _relay(self.request, upstream)

    def _check(self, host: str, port: int) -> str:
        try:
            return _checked(host, port)
        except Refused:
            self.server.refused.append(host)
            raise

    def _forward(self, method: str, target: str, version: str, headers: list[bytes], rest: bytes) -> socket.socket:
        """Plain http: the request is sent on to the checked address with its path only, and closed after one
        answer (the client opens a new connection for the next)."""
        url = urlsplit(target)
        if url.scheme != "http" or not url.hostname:
            raise ValueError(target)
        port = url.port or 80
        upstream = connect(self._check(url.hostname, port), port)
        path = (url.path or "/") + (f"?{url.query}" if url.query else "")
        kept = [h for h in headers if h and not h.lower().startswith((b"proxy-", b"connection:"))]
        request = [f"{method} {path} {version}".encode("latin-1"), *kept, b"Connection: close", b"", b""]
        upstream.sendall(b"\r\n".join(request) + rest)
        return upstream

    def _read_head(self) -> tuple[bytes | None, bytes]:
        data = b""
        while b"\r\n\r\n" not in data:
            if len(data) > MAX_HEAD:
                return None, b""
            chunk = self.request.recv(CHUNK)
            if not chunk:
                return None, b""
            data += chunk
        head, _sep, rest = data.partition(b"\r\n\r\n")
        return head, rest

    def _answer(self, status: int, text: str) -> None:
        body = text.encode()
        self.request.sendall(
            f"HTTP/1.1 {status} {text[:60]}\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode() + body
        )


def _relay(client: socket.socket, upstream: socket.socket) -> None:
    """Copy bytes both ways until either side closes or both are idle past the timeout."""
    sockets = [client, upstream]
    while True:
        ready, _w, _x = select.select(sockets, [], [], IDLE_TIMEOUT)
        if not ready:
            return
        for source in ready:
            data = source.recv(CHUNK)
            if not data:
                return
            (upstream if source is client else client).sendall(data)


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, refused: list[str]):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.refused = refused


class _UnixServer(socketserver.ThreadingUnixStreamServer):
    daemon_threads = True

    def __init__(self, path: str, refused: list[str]):
        super().__init__(path, _Handler)
        self.refused = refused


@dataclass
class Proxy:
    """A running proxy: ``env`` points a program on this host's network at it, ``socket`` is the same proxy as a
    unix socket (for a program in a network namespace of its own), ``refused`` the hosts it refused so far."""

    env: dict[str, str]
    socket: str
    refused: list[str]


@contextmanager
def proxy():
    """A proxy for one skopeo command, on the loopback and on a unix socket, for as long as the block runs."""
    refused: list[str] = []
    with tempfile.TemporaryDirectory(prefix="egress-") as folder:
        path = str(Path(folder) / "proxy.sock")
        servers = [_Server(refused), _UnixServer(path, refused)]
        for server in servers:
            threading.Thread(target=server.serve_forever, name="skopeo-egress", daemon=True).start()
        url = f"http://127.0.0.1:{servers[0].server_address[1]}"
        try:
            yield Proxy({"HTTP_PROXY": url, "HTTPS_PROXY": url, "NO_PROXY": ""}, path, refused)
        finally:
            for server in servers:
                server.shutdown()
                server.server_close()


def isolated(argv: list[str], running: Proxy) -> tuple[list[str], dict[str, str]]:
    """``argv`` run in a network namespace of its own (bubblewrap) whose only way out is ``running``: its loopback
    holds nothing but the relay to the proxy, so the addresses Go's client reaches without a proxy (a literal
    loopback address, ``localhost``) lead nowhere. Returns the argv and the proxy environment inside."""
    inside = f"http://127.0.0.1:{RELAY_PORT}"
    # --unshare-pid: when bubblewrap goes (a timeout kills it), everything it started goes with it.
    wrapped = [BWRAP, "--unshare-net", "--unshare-pid", "--die-with-parent", "--bind", "/", "/", "--"]
    wrapped += [sys.executable, str(RELAY), running.socket, str(RELAY_PORT), "--", *argv]
    return wrapped, {"HTTP_PROXY": inside, "HTTPS_PROXY": inside, "NO_PROXY": ""}


def can_isolate() -> bool:
    return os.access(BWRAP, os.X_OK)
