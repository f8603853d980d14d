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


def _server_connections() -> set[int]:
    """The backends connected to the test database other than this test's own."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_clear_snapshot()")  # read now, not as first read in this transaction
        cursor.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        return {row[0] for row in cursor.fetchall()}


@pytest.mark.django_db
@pytest.mark.postgres
def test_the_web_process_under_asgi_reuses_its_database_connections(tmp_path):
    db = connection.settings_dict
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if k not in {"CONN_MAX_AGE", "DATABASE_POOL"}} | {
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "DATABASE_URL": f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}",
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
            assert requests.get(url, timeout=30).status_code in (200, 503)  # 503: no worker here, the database read
        after = _server_connections()
    finally:
        server.terminate()
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


@pytest.mark.parametrize(
    ("env", "pooled"),
    [
        ({"CONN_MAX_AGE": "0"}, True),
        ({"CONN_MAX_AGE": "0", "DATABASE_POOL": "false"}, False),
        ({"CONN_MAX_AGE": "60"}, False),  # a worker keeps its one connection: nothing to pool
    ],
)
def test_only_a_process_that_closes_its_connections_pools_them_and_the_pool_can_be_turned_off(env, pooled):
    base = {k: v for k, v in os.environ.items() if k not in {"CONN_MAX_AGE", "DATABASE_POOL"}}
    code = (
        "import django; django.setup(); from django.conf import settings; "
        "print(bool(settings.DATABASES['default'].get('OPTIONS', {}).get('pool')))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=base | env | {"DJANGO_SETTINGS_MODULE": "config.settings", "DATABASE_URL": "postgres://u@db.example/c"},
        cwd=settings.BASE_DIR,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == str(pooled)
