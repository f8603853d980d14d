"""The web process under ASGI on PostgreSQL, which ends each request's database connection, hands it back to a pool
of open connections instead of opening a new one for the next request — and hands it back before a long response
streams, not after."""

import os
import socket
import subprocess
import sys
import time

import httpx
import pytest
import requests
from django.conf import settings
from django.db import connection, transaction

from accounts import services as accounts_services
from inference import services as endpoints
from inference.models import EndpointRequest
from inference.tests.fixtures import point_at
from marketplace.hub import repos as hub_repos
from marketplace.hub import services as hub_services
from storage.tests.fixtures import store_file
from tests.fixtures import services
from tests.fixtures.factories import UserFactory
from tests.fixtures.services import wait_until

APPLICATION = "pool-test-uvicorn"


def _server_connections() -> set[int]:
    """The server's connections to the test database (by the application name its URL gives)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_clear_snapshot()")  # read now, not as first read in this transaction
        cursor.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND application_name = %s",
            [APPLICATION],
        )
        return {row[0] for row in cursor.fetchall()}


class _Server:
    """uvicorn serving the console under ASGI on the test database, as ``make run`` and production serve it."""

    def __init__(self, tmp_path, **env):
        self.tmp_path, self.env = tmp_path, env

    def __enter__(self):
        env = {k: v for k, v in os.environ.items() if k not in {"CONN_MAX_AGE", "DATABASE_POOL"}} | {
            "DJANGO_SETTINGS_MODULE": "config.settings",
            "DATABASE_URL": f"{services.test_database_url()}?application_name={APPLICATION}",
        }
        # The server is handed a socket bound here: no window in which another process could take its port.
        listening = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{listening.getsockname()[1]}"
        self.log = open(self.tmp_path / "uvicorn.log", "wb")  # noqa: SIM115 (closed in exit)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "config.asgi:application", "--fd", str(listening.fileno())]
            + ["--log-level", "warning"],
            env=env | self.env,
            cwd=settings.BASE_DIR,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            pass_fds=[listening.fileno()],
        )
        listening.close()  # the server's copy stays open
        deadline = time.monotonic() + 60
        while True:
            try:
                requests.get(self.url + "/healthz", timeout=30)
                return self
            except requests.ConnectionError:
                assert self.process.poll() is None and time.monotonic() < deadline, self.output()
                time.sleep(0.2)

    def output(self) -> str:
        return (self.tmp_path / "uvicorn.log").read_text()

    def __exit__(self, *exc):
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=30)
        self.log.close()


@pytest.mark.django_db
@pytest.mark.postgres
def test_the_web_process_under_asgi_reuses_its_database_connections(tmp_path):
    with _Server(tmp_path) as server:
        url = server.url + "/healthz"  # reads the database on every request
        deadline = time.monotonic() + 60
        # The pool opens its connections in the background once the first request asks for one: wait for them.
        before = _server_connections()
        while len(before) < 2 and time.monotonic() < deadline:
            requests.get(url, timeout=30)
            time.sleep(0.2)
            before = _server_connections()
        for _ in range(20):
            answer = requests.get(url, timeout=30)  # 503 when no worker answers here; the database must have
            assert answer.json()["database"]["ok"], answer.text
        after = _server_connections()
    # Twenty requests, one after another, served by connections that were open before them and stay open after
    # them (closed after each request, none would be left, or a new one would be there).
    assert after, "no connection kept open between requests"
    assert after <= before, f"connections opened while serving: {after - before}"


@pytest.mark.django_db(transaction=True)
@pytest.mark.postgres
def test_a_slow_download_leaves_the_pooled_connection_to_the_other_requests(tmp_path):
    # Given a model file larger than the sockets' buffers, and a server whose pool holds a single connection
    hub_services.save_item(repo="acme/large-model", summary="Large weights.")
    with transaction.atomic():
        hub_repos.publish_catalogue_files("acme/large-model", {"weights.bin": os.urandom(24 << 20)}, "weights")
    # and a large file in a user's cloud storage
    owner = UserFactory()
    entry = store_file(owner, "/data/large.bin", os.urandom(24 << 20))
    token = accounts_services.create_api_token(owner, name="download", scope="read").plaintext
    pool = {"DATABASE_POOL_SIZE": "1", "DATABASE_POOL_TIMEOUT": "3"}
    with _Server(tmp_path, **pool) as server:
        # When a client starts the downloads — the model file whole and by a range, the stored file — and reads
        # nothing more for now
        weights = server.url + "/acme/large-model/resolve/main/weights.bin"
        stored = f"{server.url}/api/v1/storage/entries/{entry.public_id}/download/"
        downloads = [
            requests.get(url, stream=True, timeout=30, headers=headers)
            for url, headers in (
                (weights, {}),
                (weights, {"Range": "bytes=1-"}),
                (stored, {"Authorization": f"Bearer {token}"}),
            )
        ]
        try:
            assert [d.status_code for d in downloads] == [200, 206, 200], server.output()
            # Then every other request still finds the connection: the downloads gave it back when they began
            for _ in range(3):
                answer = requests.get(server.url + "/healthz", timeout=30)
                assert answer.json()["database"]["ok"], answer.text
            first = next(downloads[0].iter_content(1 << 20))
            assert len(first) > 0
        finally:
            for download in downloads:
                download.close()
    # The file was sent block by block: Django reads a synchronous body whole into memory under ASGI, and warns so
    assert "synchronous iterators" not in server.output()


@pytest.mark.django_db(transaction=True)
@pytest.mark.postgres
def test_a_model_answer_being_streamed_leaves_the_pooled_connection_to_the_other_requests(
    tmp_path, owner, deploy, model_server
):
    # Given an endpoint whose model server answers slowly (it holds its last words back until the test lets them
    # go), and a server whose pool holds a single connection
    endpoint = deploy(owner)
    point_at(endpoint, model_server.url)
    key = endpoints.create_key(endpoint).plaintext
    chat = {"model": "Qwen2.5-0.5B-Instruct", "messages": [{"role": "user", "content": "Hello"}], "stream": True}
    pool = {"DATABASE_POOL_SIZE": "1", "DATABASE_POOL_TIMEOUT": "3"}
    with _Server(tmp_path, **pool) as server, httpx.Client(base_url=server.url, timeout=30) as client:
        headers = {"Authorization": f"Bearer {key}"}
        with client.stream("POST", "/v1/chat/completions", json=chat, headers=headers) as answer:
            # When a client has the answer's first words and the rest is still being written
            assert answer.status_code == 200, server.output()
            words = answer.iter_bytes()
            assert b"Hello" in next(words)
            # Then every other request finds the connection: the proxy gave it back when the answer began
            for _ in range(3):
                health = client.get("/healthz")
                assert health.json()["database"]["ok"], health.text
            model_server.last_chunk_gate.set()
            rest = b"".join(words)
        # and the answer ends whole, its log line written on a connection borrowed again
        assert rest.rstrip().endswith(b"data: [DONE]")
        row = wait_until(lambda: EndpointRequest.objects.filter(endpoint=endpoint).first(), message="the log line")
        assert row.stream and row.status_code == 200
