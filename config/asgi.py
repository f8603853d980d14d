"""ASGI entry point (``uvicorn config.asgi:application``): Django for the console; the instances' labs before it.

A request to a lab host (``<instance-id>.<LAB_DOMAIN>``: JupyterLab's pages, files, kernels and terminals, and the
web apps on its exposed ports) goes to the JupyterLab proxy, HTTP and websockets alike; it never reaches the
console's views. Any other websocket is refused with 404. The lifespan protocol is acknowledged: the console has
nothing to start.
"""

import os

from django.conf import settings
from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")


def _django_application():
    """Django's ASGI handler. Under ASGI each request's database work runs on a thread of its own, so a connection
    kept for reuse would stay open per request: the web process closes its connection when a request ends, as Django
    advises for ASGI (``CONN_MAX_AGE`` 0 unless set; on PostgreSQL the settings then hand it back to a pool of open
    connections, for this process only: ``GPUCLOUD_ASGI_PROCESS``). The variables are set for the settings' first
    read only, and removed after it: what this process starts (a worker, a WSGI server) keeps its own defaults.
    Imported into a process whose settings are loaded already (the tests' in-process server), nothing is changed."""
    if settings.configured:
        return get_asgi_application()
    added = {"GPUCLOUD_ASGI_PROCESS": "1"} | ({} if "CONN_MAX_AGE" in os.environ else {"CONN_MAX_AGE": "0"})
    os.environ.update(added)
    try:
        return get_asgi_application()
    finally:
        for name in added:
            del os.environ[name]


django_application = _django_application()

# Imported once Django is set up (get_asgi_application above), as the proxy reads models and settings.
from instances.jupyter_proxy import deny, lab_application, lab_label  # noqa: E402


async def application(scope, receive, send):
    if scope["type"] in ("http", "websocket") and lab_label(_host(scope)) is not None:
        await lab_application(scope, receive, send)
    elif scope["type"] == "http":
        await django_application(scope, receive, send)
    elif scope["type"] == "websocket":
        await receive()  # the handshake's websocket.connect
        await deny(scope, send, 404)
    elif scope["type"] == "lifespan":
        await _lifespan(receive, send)


def _host(scope) -> str:
    return next((value.decode("latin-1") for key, value in scope["headers"] if key == b"host"), "")


async def _lifespan(receive, send):
    while (await receive())["type"] != "lifespan.shutdown":
        await send({"type": "lifespan.startup.complete"})
    await send({"type": "lifespan.shutdown.complete"})
