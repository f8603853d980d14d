"""ASGI entry point (``uvicorn config.asgi:application``): Django for HTTP; websockets routed before Django, which
cannot hold one.

A websocket under ``/instances/<id>/lab/`` (a JupyterLab kernel or terminal) goes to the JupyterLab proxy; any
other websocket is refused with 404. The lifespan protocol is acknowledged: the console has nothing to start.
"""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
django_application = get_asgi_application()

# Imported once Django is set up (get_asgi_application above), as the proxy reads models and settings.
from instances.jupyter_proxy import LAB_PATH, deny, lab_websocket  # noqa: E402


async def application(scope, receive, send):
    if scope["type"] == "http":
        await django_application(scope, receive, send)
    elif scope["type"] == "websocket" and LAB_PATH.match(scope["path"]):
        await lab_websocket(scope, receive, send)
    elif scope["type"] == "websocket":
        await receive()  # the handshake's websocket.connect
        await deny(scope, send, 404)
    elif scope["type"] == "lifespan":
        await _lifespan(receive, send)


async def _lifespan(receive, send):
    while (await receive())["type"] != "lifespan.shutdown":
        await send({"type": "lifespan.startup.complete"})
    await send({"type": "lifespan.shutdown.complete"})
