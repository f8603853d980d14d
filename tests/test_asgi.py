"""The console under uvicorn, as ``make run`` and production serve it (``config.asgi``): pages, static files from
WhiteNoise in async mode (streamed, never read whole through a thread), and websockets outside JupyterLab refused."""

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
