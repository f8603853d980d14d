"""The console under uvicorn, as ``make run`` and production serve it (``config.asgi``): pages, static files from
WhiteNoise in async mode (streamed, never read whole through a thread), and websockets outside JupyterLab refused."""

import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from django.conf import settings
from websockets.exceptions import InvalidStatus

from tests.asgi_server import browser, open_websocket


def test_pages_and_static_files_are_served_without_a_thread_reading_them(console_server, owner):
    stylesheet = (Path(settings.BASE_DIR) / "static" / "css" / "app.css").read_bytes()
    client = browser(console_server, owner)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        page = client.get("/console/")
        static = client.get("/static/css/app.css")
        head = client.head("/static/css/app.css")
        unchanged = client.get("/static/css/app.css", headers={"If-None-Match": static.headers["etag"]})

    assert page.status_code == 200 and "content-security-policy" in page.headers
    assert static.status_code == 200 and static.content == stylesheet
    assert head.status_code == 200 and head.content == b""
    assert unchanged.status_code == 304
    # Django warns when it must read a synchronous body whole before sending it under ASGI.
    assert not [w for w in caught if "must consume synchronous iterators" in str(w.message)]


def test_a_websocket_outside_jupyterlab_is_refused_with_404(console_server, owner):
    with pytest.raises(InvalidStatus) as refused:
        open_websocket(console_server, "/console/", owner)
    assert refused.value.response.status_code == 404


CHILD_MAX_AGE = (
    "import subprocess, sys; "
    "code = 'import django; django.setup(); from django.conf import settings; "
    'print(settings.DATABASES["default"]["CONN_MAX_AGE"])\'; '
    "print(subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, check=True).stdout.strip())"
)


PROCESS_SETTINGS = {"CONN_MAX_AGE", "DATABASE_POOL", "GPUCLOUD_ASGI_PROCESS"}


def _python(code: str, **env: str) -> list[str]:
    """Run ``code`` in a new Python process with the console's settings, none of this one's connection settings,
    and ``env``; return its printed words."""
    env = {k: v for k, v in os.environ.items() if k not in PROCESS_SETTINGS} | {
        "DJANGO_SETTINGS_MODULE": "config.settings",
        **env,
    }
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=settings.BASE_DIR, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.split()


def test_the_asgi_process_closes_its_connections_and_what_it_starts_keeps_them_open():
    # The process serving ASGI closes its database connection after each request; a worker or a WSGI server it
    # starts keeps the default reuse (60 s), as one started on its own does.
    served = _python(
        "import config.asgi; from django.conf import settings; "
        "print(settings.DATABASES['default']['CONN_MAX_AGE']); " + CHILD_MAX_AGE
    )
    assert served == ["0", "60"]
    # A process with its settings loaded that imports the ASGI application (the tests' and benchmarks' in-process
    # server) changes nothing: neither its own connections nor those of the servers it starts.
    imported = _python(
        "import django; django.setup(); import config.asgi; from django.conf import settings; "
        "print(settings.DATABASES['default']['CONN_MAX_AGE']); " + CHILD_MAX_AGE
    )
    assert imported == ["60", "60"]


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
    options = "settings.DATABASES['default'].get('OPTIONS', {})"
    code = f"{start}; from django.conf import settings; print('pool' in {options})"
    printed = _python(code, DATABASE_URL="postgres://u@db.example/c", **env)
    assert printed == [str(pooled)]
