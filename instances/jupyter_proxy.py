"""JupyterLab through the console: ``/instances/<id>/lab/…`` reverse-proxied to the instance's Jupyter server.

HTTP goes through the async view :func:`lab`. A Django view cannot hold a websocket (kernels, terminals), so
``config/asgi.py`` routes those to :func:`lab_websocket`. Both admit the instance's owner only — anyone else, signed
in or not, gets the 404 of a missing instance — ask the backend where the server answers (``jupyter()``), and sign
every request to it with the server's token in an ``Authorization`` header. The token never reaches the browser:
it is cut out of the text Jupyter sends (JupyterLab writes it into its page; the user's own files go on unscanned, see
:func:`_may_hold_token`). The browser's cookies and credentials never reach the machine, and the cookies Jupyter sets
stay inside the lab's path.

Jupyter skips its own XSRF check for token-signed requests, so the console checks origins instead: a websocket, and
any request but GET, HEAD and OPTIONS, must come from the console's own origin. Everything the machine answers is
untrusted (its owner runs any code there): headers that would reach beyond the lab are dropped.

Paths and queries are forwarded unchanged, because the server's ``base_url`` is the console path.
"""

import asyncio
import re
from collections.abc import AsyncIterator
from http import HTTPStatus
from http.cookies import CookieError, SimpleCookie
from importlib import import_module
from types import SimpleNamespace
from urllib.parse import urlsplit, urlunsplit

import httpx
from asgiref.sync import sync_to_async
from django.conf import settings
from django.contrib import auth
from django.core.exceptions import PermissionDenied
from django.core.handlers.asgi import ASGIRequest
from django.db import close_old_connections
from django.http import Http404, StreamingHttpResponse
from django.http.cookie import parse_cookie
from django.http.request import split_domain_port, validate_host
from django.shortcuts import render
from django.urls import get_resolver
from django.utils.encoding import escape_uri_path
from django.utils.translation import gettext as _
from django.views.decorators.csrf import csrf_exempt
from websockets.asyncio.client import ClientConnection, connect, unix_connect
from websockets.exceptions import ConnectionClosed, WebSocketException

from console.errors import NotFound
from console.upstream import async_client

from .backends import JupyterServer, get_backend
from .lifecycle import get_instance

LAB_PATH = re.compile(r"^/instances/(?P<public_id>[^/]+)/lab/")
READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
    }
)
# The browser's credentials are for the console. Jupyter is signed in with its token and addressed as localhost
# (its host check refuses other names); its answers come uncompressed so the token can be cut out of them.
NOT_FORWARDED = HOP_BY_HOP | {"host", "cookie", "authorization", "origin", "accept-encoding", "content-length"}
# Headers that would act beyond the lab's path: on the console's other pages, cookies or transport security.
NOT_RETURNED = HOP_BY_HOP | {
    "content-length",
    "set-cookie",
    "strict-transport-security",
    "clear-site-data",
    "service-worker-allowed",
    "alt-svc",
}
TIMEOUT = httpx.Timeout(connect=5, read=600, write=60, pool=5)
BODY_BLOCK = 64 * 1024
# Answers go on in blocks of up to 256 KB (httpx reads the socket 64 KB at a time): each block costs the ASGI server
# a send and the event loop a turn, so a download takes 4 times fewer. (Larger blocks measured slower: reading and
# sending overlap less.)
RELAY_BLOCK = 256 * 1024
WEBSOCKET_MAX_MESSAGE = 64 * 1024 * 1024  # a notebook output with large images; far above Jupyter's usual messages


def lab_server(user, public_id) -> JupyterServer | None:
    """The Jupyter server of ``user``'s instance ``public_id`` (None while it has none). Entering a machine is a
    change, not a view; anyone else's instance and a missing one raise the same NotFound."""
    instance = get_instance(user, public_id, "change")
    return get_backend(instance.backend_name).jupyter(instance)


def trusted_origin(origin: str | None, host: str) -> bool:
    """Whether a browser's ``Origin`` is the console itself (or one the operator trusts for CSRF)."""
    if not origin:
        return False
    return urlsplit(origin).netloc == host or origin in settings.CSRF_TRUSTED_ORIGINS


# HTTP -----------------------------------------------------------------------------------------------------------


@csrf_exempt  # JupyterLab sends Jupyter's XSRF header, not Django's; the origin check below stands in for both
async def lab(request, public_id: str, path: str = ""):
    try:
        server = await sync_to_async(lab_server)(await request.auser(), public_id)
    except NotFound as exc:
        return await _refusal(request, Http404(str(exc.message)))
    if server is None:
        message = _("JupyterLab is not running on this instance. It runs while the instance is running.")
        return await _unavailable(request, public_id, 503, message)
    if request.method not in READ_METHODS and not trusted_origin(request.headers.get("Origin"), request.get_host()):
        return await _refusal(request, PermissionDenied())
    client = async_client(timeout=TIMEOUT, socket=server.socket)
    try:
        upstream = await client.send(_upstream_request(client, request, server), stream=True)
    except httpx.HTTPError:
        await client.aclose()
        message = _(
            "JupyterLab on this instance is not answering. It may still be starting, or it has stopped; "
            "try again in a moment."
        )
        return await _unavailable(request, public_id, 502, message)
    return await _relay(request, server, client, upstream)


async def _refusal(request, exception):
    """The console's 404 or 403 page, rendered on this request's thread. (Raised, Django would render it on a shared
    worker thread, where nothing closes the database connection the page opens.)"""
    handler = get_resolver().resolve_error_handler(404 if isinstance(exception, Http404) else 403)
    return await sync_to_async(handler)(request, exception)


async def _unavailable(request, public_id, status, message):
    context = {"public_id": public_id, "status": status, "message": message}
    return await sync_to_async(render)(request, "instances/lab_unavailable.html", context, status=status)


def _upstream_origin(server: JupyterServer) -> str:
    if not server.url:
        return "http://localhost"
    parts = urlsplit(server.url)
    return f"{parts.scheme}://{parts.netloc}"


def _target(request) -> str:
    """The path and query as the browser sent them, percent-encoding included (the ASGI server's raw path)."""
    raw = getattr(request, "scope", {}).get("raw_path")
    path = raw.decode("latin-1") if raw else escape_uri_path(request.path)
    query = request.META.get("QUERY_STRING", "")
    return f"{path}?{query}" if query else path


def _content_length(request) -> int:
    try:
        return max(int(request.META.get("CONTENT_LENGTH") or 0), 0)
    except ValueError:
        return 0


def _upstream_request(client, request, server: JupyterServer) -> httpx.Request:
    named = {name.strip().lower() for name in request.headers.get("Connection", "").split(",")}
    headers = {k: v for k, v in request.headers.items() if k.lower() not in NOT_FORWARDED | named and v}
    headers |= {"Authorization": f"token {server.token}", "Accept-Encoding": "identity"}
    length = _content_length(request)
    if length:
        headers["Content-Length"] = str(length)
    body = _request_body(request) if length else None
    return client.build_request(
        request.method, _upstream_origin(server) + _target(request), headers=headers, content=body
    )


async def _request_body(request) -> AsyncIterator[bytes]:
    # Django's ASGI handler has the whole body (in memory, or spooled to a file past FILE_UPLOAD_MAX_MEMORY_SIZE)
    # before a view runs; it goes on in blocks, with no limit of the console's (notebooks and uploads are the lab's).
    while block := request.read(BODY_BLOCK):
        yield block


async def _relay(request, server, client, upstream) -> StreamingHttpResponse:
    text = _may_hold_token(request, server, upstream.headers.get("content-type", ""))
    if isinstance(request, ASGIRequest):
        chunks = _streamed(client, upstream)
    else:
        # Under WSGI (the test client, runserver) Django reads the body on another event loop, after this one has
        # ended: read it here, whole.
        chunks = _replayed([chunk async for chunk in _streamed(client, upstream)])
    body = _without(server.token.encode(), chunks) if text and server.token else chunks
    response = StreamingHttpResponse(body, status=upstream.status_code)
    _copy_headers(upstream, response, server, keep_length=not text)
    # JupyterLab needs eval and inline styles, which the console's Content-Security-Policy forbids: Jupyter's own
    # policy (frame-ancestors 'self') stands instead, and framing by the console's own pages only.
    response._csp_exempt = True
    response.headers.setdefault("X-Frame-Options", "SAMEORIGIN")
    return response


async def _streamed(client, upstream) -> AsyncIterator[bytes]:
    try:
        async for chunk in upstream.aiter_raw(RELAY_BLOCK):
            yield chunk
    finally:
        await upstream.aclose()
        await client.aclose()


async def _replayed(chunks: list[bytes]) -> AsyncIterator[bytes]:
    for chunk in chunks:
        yield chunk


def _may_hold_token(request, server: JupyterServer, content_type: str) -> bool:
    """Whether the token is cut out of this answer. Jupyter writes it into the pages it renders (JupyterLab's page
    config), and any text of its own (pages, API answers, scripts) is scanned. Under ``files/`` Jupyter sends the
    bytes of the user's own files unchanged (downloads, often large): they go on unscanned, at full speed, as
    Jupyter never writes its token there; a file that holds it was put there by the machine's owner, who can read
    the token on the machine anyway."""
    if request.path.startswith(f"{server.base_path}files/"):
        return False
    kind = content_type.split(";")[0].strip().lower()
    return kind.startswith("text/") or kind.endswith(("json", "javascript", "xml"))


async def _without(secret: bytes, chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """``chunks`` with every ``secret`` cut out, including one split across two chunks."""
    held = b""
    async for chunk in chunks:
        data = (held + chunk).replace(secret, b"")
        cut = max(len(data) - (len(secret) - 1), 0)  # the tail may be the start of the secret
        held = data[cut:]
        if cut:
            yield data[:cut]
    if held:
        yield held


def _copy_headers(upstream, response, server: JupyterServer, *, keep_length: bool) -> None:
    named = {name.strip().lower() for name in upstream.headers.get("connection", "").split(",")}
    if "content-type" not in upstream.headers:
        del response.headers["Content-Type"]
    for name, value in upstream.headers.multi_items():
        lower = name.lower()
        if lower == "set-cookie":
            _keep_in_lab(response, value, server.base_path)
        elif lower == "content-length" and keep_length:
            response.headers[name] = value
        elif lower == "location":
            response.headers[name] = _local(value, _upstream_origin(server))
        elif lower not in NOT_RETURNED | named and not lower.startswith("access-control-"):
            # CORS answers are dropped: the lab is only ever read by the console's own origin.
            response.headers[name] = f"{response.headers[name]}, {value}" if name in response.headers else value


def _keep_in_lab(response, header: str, base_path: str) -> None:
    """A cookie Jupyter sets, confined to the lab's path (whatever path or domain it named); never one named like
    the console's own cookies."""
    jar = SimpleCookie()
    try:
        jar.load(header)
    except CookieError:
        return
    own = {settings.SESSION_COOKIE_NAME, settings.CSRF_COOKIE_NAME, settings.LANGUAGE_COOKIE_NAME}
    for name, morsel in jar.items():
        if name not in own:
            morsel["path"], morsel["domain"] = base_path, ""
            response.cookies[name] = morsel


def _local(location: str, upstream_origin: str) -> str:
    """A redirect to the upstream's own address, as a path on the console."""
    parts = urlsplit(location)
    if parts.netloc and f"{parts.scheme}://{parts.netloc}" == upstream_origin:
        return urlunsplit(("", "", parts.path, parts.query, parts.fragment))
    return location


# Websockets ------------------------------------------------------------------------------------------------------


async def lab_websocket(scope, receive, send) -> None:
    """The ASGI application for a websocket under a lab path (config/asgi.py routes it here)."""
    if (await receive())["type"] != "websocket.connect":
        return
    host = _header(scope, "host")
    if not validate_host(split_domain_port(host)[0], settings.ALLOWED_HOSTS):
        return await deny(scope, send, 400)
    if not trusted_origin(_header(scope, "origin"), host):
        return await deny(scope, send, 403)
    try:
        server = await sync_to_async(_server_for_scope)(scope)
    except NotFound:
        return await deny(scope, send, 404)
    if server is None:
        return await deny(scope, send, 503)
    try:
        upstream = await _connect(server, scope)
    except (OSError, TimeoutError, WebSocketException):
        return await deny(scope, send, 502)
    try:
        await send({"type": "websocket.accept", "subprotocol": upstream.subprotocol})
        await _pump(receive, send, upstream)
    finally:
        await upstream.close()


async def deny(scope, send, status: int) -> None:
    """Refuse a websocket handshake with an HTTP status, where the server supports ASGI's denial response (uvicorn
    does); elsewhere a close, which the server answers with 403."""
    if "websocket.http.response" not in scope.get("extensions", {}):
        await send({"type": "websocket.close", "code": 1008})
        return
    body = HTTPStatus(status).phrase.encode()
    headers = [(b"content-type", b"text/plain; charset=utf-8"), (b"content-length", str(len(body)).encode())]
    await send({"type": "websocket.http.response.start", "status": status, "headers": headers})
    await send({"type": "websocket.http.response.body", "body": body})


def _header(scope, name: str) -> str:
    wanted = name.encode()
    return next((value.decode("latin-1") for key, value in scope["headers"] if key.lower() == wanted), "")


def _server_for_scope(scope) -> JupyterServer | None:
    # Outside Django's request cycle nobody else closes a connection that has gone bad or old.
    close_old_connections()
    try:
        return lab_server(_session_user(scope), LAB_PATH.match(scope["path"])["public_id"])
    finally:
        close_old_connections()


def _session_user(scope):
    """The user of the session cookie the handshake carries (anonymous without one), as Django's middleware finds
    it: the same session engine, the same checks (active user, password not changed since)."""
    cookies = parse_cookie(_header(scope, "cookie"))
    store = import_module(settings.SESSION_ENGINE).SessionStore(cookies.get(settings.SESSION_COOKIE_NAME))
    return auth.get_user(SimpleNamespace(session=store))


async def _connect(server: JupyterServer, scope) -> ClientConnection:
    raw = scope.get("raw_path")
    path = raw.decode("latin-1") if raw else escape_uri_path(scope["path"])
    query = scope.get("query_string", b"").decode("latin-1")
    target = f"{path}?{query}" if query else path
    options = {
        "additional_headers": {"Authorization": f"token {server.token}"},
        "subprotocols": scope.get("subprotocols") or None,
        "compression": None,  # a local socket: compressing costs CPU and saves nothing
        "max_size": WEBSOCKET_MAX_MESSAGE,
        "open_timeout": TIMEOUT.connect,
    }
    uri = "ws" + _upstream_origin(server).removeprefix("http") + target
    if server.socket:
        return await unix_connect(server.socket, uri, **options)
    return await connect(uri, **options)


async def _pump(receive, send, upstream: ClientConnection) -> None:
    """Frames both ways, text as text and binary as binary, until either side closes; the browser learns the
    machine's close code."""
    browser_gone = asyncio.Event()
    from_browser = asyncio.create_task(_from_browser(receive, upstream, browser_gone))
    try:
        async for data in upstream:
            await send({"type": "websocket.send", "bytes" if isinstance(data, bytes) else "text": data})
    except ConnectionClosed:
        pass
    except OSError:  # the ASGI server's "client disconnected"
        browser_gone.set()
    finally:
        from_browser.cancel()
    if not browser_gone.is_set():
        await send({"type": "websocket.close", "code": _close_code(upstream.close_code)})


async def _from_browser(receive, upstream: ClientConnection, gone: asyncio.Event) -> None:
    while (message := await receive())["type"] == "websocket.receive":
        data = message.get("bytes")
        try:
            await upstream.send(data if data is not None else message.get("text") or "")
        except ConnectionClosed:
            return  # the machine closed: the loop over its frames ends and tells the browser
    gone.set()
    await upstream.close()


def _close_code(code: int | None) -> int:
    """The upstream's close code where one may be sent on; 1011 (server error) when it went away without one."""
    if code is not None and (1000 <= code <= 1003 or 1007 <= code <= 1014 or 3000 <= code <= 4999):
        return code
    return 1011
