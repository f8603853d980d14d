"""The web process under ASGI on PostgreSQL, which ends each request's database connection, hands it back to a pool
of open connections instead of opening a new one for the next request."""

import os
import socket
import subprocess
import sys
import time

import pytest
import requests
from django.conf import settings
from django.db import connection

from tests.fixtures import services

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


@pytest.mark.django_db
@pytest.mark.postgres
def test_the_web_process_under_asgi_reuses_its_database_connections(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in {"CONN_MAX_AGE", "DATABASE_POOL"}} | {
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "DATABASE_URL": f"{services.test_database_url()}?application_name={APPLICATION}",
    }
    # The server is handed a socket bound here: no window in which another process could take its port.
    listening = socket.create_server(("127.0.0.1", 0))
    port = listening.getsockname()[1]
    log = open(tmp_path / "uvicorn.log", "wb")  # noqa: SIM115 (closed below)
    server = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "config.asgi:application", "--fd", str(listening.fileno())]
        + ["--log-level", "warning"],
        env=env,
        cwd=settings.BASE_DIR,
        stdout=log,
        stderr=subprocess.STDOUT,
        pass_fds=[listening.fileno()],
    )
    listening.close()  # the server's copy stays open
    url = f"http://127.0.0.1:{port}/healthz"  # reads the database on every request
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                requests.get(url, timeout=30)
                break
            except requests.ConnectionError:
                assert server.poll() is None and time.monotonic() < deadline, (tmp_path / "uvicorn.log").read_text()
                time.sleep(0.2)
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
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=30)
        log.close()
    # Twenty requests, one after another, served by connections that were open before them and stay open after
    # them (closed after each request, none would be left, or a new one would be there).
    assert after, "no connection kept open between requests"
    assert after <= before, f"connections opened while serving: {after - before}"
