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

from tests.fixtures.services import test_database_url

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
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if k not in {"CONN_MAX_AGE", "DATABASE_POOL"}} | {
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "DATABASE_URL": f"{test_database_url()}?application_name={APPLICATION}",
    }
    log = open(tmp_path / "uvicorn.log", "wb")  # noqa: SIM115 (closed below)
    server = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "config.asgi:application", "--port", str(port), "--log-level", "warning"],
        env=env,
        cwd=settings.BASE_DIR,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
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


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


ASGI_PROCESS = "import config.asgi"  # the web process: its settings first read by the ASGI entry point
OTHER_PROCESS = "import django; django.setup()"  # a worker, beat, a command, a WSGI server


@pytest.mark.parametrize(
    ("start", "env", "pooled"),
    [
        (ASGI_PROCESS, {}, True),
        (ASGI_PROCESS, {"DATABASE_POOL": "false"}, False),
        (ASGI_PROCESS, {"CONN_MAX_AGE": "60"}, False),  # told to keep its connection: nothing to pool
        (OTHER_PROCESS, {}, False),
        (OTHER_PROCESS, {"CONN_MAX_AGE": "0"}, False),  # closes its connections, but is not the web process
    ],
)
def test_only_the_web_process_under_asgi_pools_its_connections_and_the_pool_can_be_turned_off(start, env, pooled):
    base = {k: v for k, v in os.environ.items() if k not in {"CONN_MAX_AGE", "DATABASE_POOL", "GPUCLOUD_ASGI_PROCESS"}}
    code = f"{start}; from django.conf import settings; print(settings.DATABASES['default'].get('OPTIONS', {{}}))"
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=base | env | {"DJANGO_SETTINGS_MODULE": "config.settings", "DATABASE_URL": "postgres://u@db.example/c"},
        cwd=settings.BASE_DIR,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert ("'pool'" in done.stdout) is pooled, done.stdout
