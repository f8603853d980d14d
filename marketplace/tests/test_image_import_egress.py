"""skopeo reaches only public addresses: a registry on the loopback that sends a blob download or its token server to
a private address fails the import with a clear message, and the egress proxy refuses that address without ever
connecting to it. Nothing here sends a byte anywhere but the host's own loopback."""

import contextlib
import hashlib
import ipaddress
import json
import socket
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from marketplace.choices import ImageStatus
from marketplace.images import egress, imports, oci, references

pytestmark = pytest.mark.django_db

CONFIG = json.dumps({"architecture": "amd64", "os": "linux", "rootfs": {"type": "layers", "diff_ids": []}}).encode()
CONFIG_DIGEST = "sha256:" + hashlib.sha256(CONFIG).hexdigest()
MANIFEST = json.dumps(
    {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {
            "mediaType": "application/vnd.oci.image.config.v1+json",
            "digest": CONFIG_DIGEST,
            "size": len(CONFIG),
        },
        "layers": [
            {"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": "sha256:" + "a" * 64, "size": 100}
        ],
    }
).encode()


class HostileRegistry(BaseHTTPRequestHandler):
    """A registry that serves a manifest, then answers every blob with a redirect to a private address; or, with
    ``token_realm``, sends its clients to a token server on a private address."""

    token_realm = ""
    redirect = "http://10.0.0.8:5000/stolen"
    seen: list[str] = []

    def do_GET(self):
        self.seen.append(self.path)
        if self.token_realm:
            self._answer(401, b"{}", {"WWW-Authenticate": f'Bearer realm="{self.token_realm}",service="evil"'})
        elif self.path == "/v2/":
            self._answer(200, b"{}")
        elif "/manifests/" in self.path:
            digest = "sha256:" + hashlib.sha256(MANIFEST).hexdigest()
            headers = {"Content-Type": "application/vnd.oci.image.manifest.v1+json", "Docker-Content-Digest": digest}
            self._answer(200, MANIFEST, headers)
        else:
            self._answer(307, b"", {"Location": self.redirect})

    do_HEAD = do_GET

    def _answer(self, status, body, headers=None):
        self.send_response(status)
        for name, value in {"Docker-Distribution-API-Version": "registry/2.0", **(headers or {})}.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def hostile_registry():
    """``start(token_realm="")`` → ``host:port`` of a hostile registry on the loopback."""
    servers = []

    def start(token_realm="", redirect=HostileRegistry.redirect):
        handler = type("Handler", (HostileRegistry,), {"token_realm": token_realm, "redirect": redirect, "seen": []})
        server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"127.0.0.1:{server.server_address[1]}", handler.seen

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


@pytest.fixture
def connections(monkeypatch):
    """Every address the egress proxy connects to."""
    made = []
    real = egress.connect

    def watched(address, port):
        made.append(address)
        return real(address, port)

    monkeypatch.setattr(egress, "connect", watched)
    return made


@pytest.fixture
def run_tasks(django_capture_on_commit_callbacks, eager_tasks):
    def start(*args, **kwargs):
        with django_capture_on_commit_callbacks(execute=True):
            image = imports.start_import(*args, **kwargs)
        image.refresh_from_db()
        return image

    return start


def test_a_blob_redirected_to_a_private_address_fails_the_import_and_is_never_fetched(
    owner, image_imports, hostile_registry, connections, run_tasks
):
    registry, seen = hostile_registry()
    image = run_tasks(owner, f"{registry}/team/evil:1")
    assert image.status == ImageStatus.FAILED
    assert "10.0.0.8" in image.status_detail and "not a public address" in image.status_detail
    assert any("/blobs/" in path for path in seen)  # skopeo did ask for the blob and was redirected
    assert "10.0.0.8" not in connections
    assert not oci.rootfs_of(image.imported.tag).exists()


def test_a_token_server_on_a_private_address_fails_the_import_and_is_never_asked(
    owner, image_imports, hostile_registry, connections, run_tasks
):
    registry, _seen = hostile_registry(token_realm="http://10.0.0.9:8080/token")
    image = run_tasks(owner, f"{registry}/team/evil:1")
    assert image.status == ImageStatus.FAILED
    assert "10.0.0.9" in image.status_detail
    assert "10.0.0.9" not in connections


def _through(proxy_url: str, url: str) -> tuple[int, bytes]:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({"http": proxy_url}))
    try:
        with opener.open(url, timeout=10) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as refused:
        return refused.code, refused.read()


def test_the_proxy_forwards_to_allowed_addresses_and_refuses_private_ones_without_connecting(
    image_imports, hostile_registry, connections
):
    registry, seen = hostile_registry()
    with egress.proxy() as running:
        env, refused = running.env, running.refused
        assert _through(env["HTTP_PROXY"], f"http://{registry}/v2/") == (200, b"{}")
        status, body = _through(env["HTTP_PROXY"], "http://10.0.0.8:5000/stolen")
        # https goes through CONNECT, checked the same way
        with socket.create_connection(("127.0.0.1", int(env["HTTPS_PROXY"].rsplit(":", 1)[1]))) as tunnel:
            tunnel.sendall(b"CONNECT 192.168.1.1:443 HTTP/1.1\r\nHost: 192.168.1.1:443\r\n\r\n")
            answer = tunnel.recv(1000)
    assert seen == ["/v2/"]
    assert status == 403 and b"not a public address" in body
    assert answer.startswith(b"HTTP/1.1 403")
    assert refused == ["10.0.0.8", "192.168.1.1"]
    assert connections == ["127.0.0.1"]


def test_the_loopback_is_refused_by_the_proxy_where_the_setting_does_not_allow_it(
    settings, hostile_registry, connections
):
    registry, seen = hostile_registry()
    settings.IMAGE_IMPORT_ALLOW_LOOPBACK = False
    with egress.proxy() as running:
        status, _body = _through(running.env["HTTP_PROXY"], f"http://{registry}/v2/")
        refused = running.refused
    assert status == 403 and refused == ["127.0.0.1"] and not seen and not connections


@pytest.fixture
def canary():
    """A port on the host's loopback that notes every connection made to it (a service skopeo must never reach)."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    touched = []
    stop = threading.Event()

    def watch():
        while not stop.is_set():
            try:
                connection, _address = listener.accept()
            except TimeoutError:
                continue
            except OSError:  # closed at the end of the test
                return
            touched.append(connection.getpeername())
            connection.close()

    threading.Thread(target=watch, daemon=True).start()
    yield listener.getsockname()[1], touched
    stop.set()
    listener.close()


@pytest.mark.skipif(not egress.can_isolate(), reason="needs bubblewrap (apt-get install bubblewrap)")
def test_a_redirect_to_the_hosts_loopback_which_go_sends_past_any_proxy_reaches_nothing(
    owner, image_imports, hostile_registry, canary, monkeypatch, run_tasks
):
    # Given a registry by a name (reached through the proxy, which resolves it) that redirects its blobs to a
    # service on the host's loopback: Go's client never sends a literal loopback address to a proxy
    port, touched = canary
    registry, seen = hostile_registry(redirect=f"http://127.0.0.1:{port}/stolen")
    real = references.addresses
    monkeypatch.setattr(
        references,
        "addresses",
        lambda host: {ipaddress.ip_address("127.0.0.1")} if host == "hostile.test" else real(host),
    )
    image = run_tasks(owner, f"hostile.test:{registry.rsplit(':', 1)[1]}/team/evil:1")
    # Then skopeo, in a network namespace of its own, found nothing at that address: the host's service was not
    # reached, and the import failed
    assert any("/blobs/" in path for path in seen)
    assert image.status == ImageStatus.FAILED
    assert touched == []


def test_the_copy_takes_the_manifest_the_size_check_read_by_its_digest(monkeypatch):
    # A registry could show the size check a small manifest for the tag and the copy a big one: the copy asks for
    # the manifest read, by its digest.
    manifest = json.dumps({"schemaVersion": 2, "layers": [{"size": 1234, "digest": "sha256:" + "a" * 64}]})
    asked = []

    def run(argv, env, watch=None):
        asked.append(argv)
        return manifest

    monkeypatch.setattr(oci, "_run", run)
    monkeypatch.setattr(oci, "locked", lambda: contextlib.nullcontext())
    reference = references.parse("registry.example.com/team/train:latest")
    size, pinned = oci.packed_size(reference)
    oci.copy(pinned, "t1", declared=size)

    digest = "sha256:" + hashlib.sha256(manifest.encode()).hexdigest()
    assert size == 1234
    assert asked[0][-1] == "docker://registry.example.com/team/train:latest"  # the size check reads the tag
    assert f"docker://registry.example.com/team/train@{digest}" in asked[-1]  # the copy, what it read


class EndlessRegistry(HostileRegistry):
    """A registry whose layer says it is 100 bytes and then sends up to 2 GB (counted in ``sent``)."""

    sent: list[int] = []

    def do_GET(self):
        if "/blobs/" in self.path and CONFIG_DIGEST not in self.path:
            self.send_response(200)
            self.send_header("Docker-Distribution-API-Version", "registry/2.0")
            self.send_header("Content-Type", "application/octet-stream")
            self.end_headers()
            chunk = b"\0" * (1024 * 1024)
            try:
                for _ in range(2048):
                    self.wfile.write(chunk)
                    self.sent.append(len(chunk))
            except OSError:  # the client hung up
                pass
        elif "/blobs/" in self.path:
            self._answer(200, CONFIG, {"Content-Type": "application/octet-stream"})
        else:
            super().do_GET()


def test_a_registry_that_sends_more_than_its_manifest_declares_is_cut_off_and_leaves_nothing(
    owner, image_imports, run_tasks
):
    handler = type("Handler", (EndlessRegistry,), {"seen": [], "sent": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        image = run_tasks(owner, f"127.0.0.1:{server.server_address[1]}/team/endless:1")
    finally:
        server.shutdown()
        server.server_close()
    assert image.status == ImageStatus.FAILED
    assert "more than the 100 bytes its manifest declares" in image.status_detail
    assert sum(handler.sent) < 1024**3  # stopped long before the 2 GB it was being sent
    assert not list(oci.layout().glob(f"{oci.PUTTING}*"))  # no half-written blob left on the host


def test_a_watch_that_fails_stops_the_tool_at_once(settings):
    """Anything raised while a tool runs (the watch failing, a signal handler's, a task's time limit) kills it: the
    worker never waits for it to end by itself."""
    settings.IMAGE_IMPORT_TIMEOUT_SECONDS = 60

    def watch():
        raise OSError("the layout's folder could not be read")

    started = time.monotonic()
    with pytest.raises(OSError):
        oci._run(["/bin/sleep", "6"], watch=watch)
    assert time.monotonic() - started < 3, "the tool ran on to its end after the watch failed"
