"""JupyterLab through the console, on an origin of its own per instance.

A lab runs whatever its owner (or a notebook, an HTML file, a web app on an exposed port) puts in it. Served on the
console's origin, its script could call the console as the signed-in user. So each instance's lab answers at its
own host name, ``<instance-id>.<LAB_DOMAIN>`` on the console's port (``lab.localhost`` by default: browsers take
every ``*.localhost`` name to this machine), as JupyterHub's ``subdomain_host`` does. The console's cookies are
host-only, so they never reach a lab, and one lab cannot read another's.

Entering goes back and forth once, as an OAuth sign-in does:

1. :func:`lab` — the console's own ``/instances/<id>/lab/…`` (the instance page links there). It admits the
   instance's owner only (anyone else, signed in or not, gets the 404 of a missing instance) and sends the browser
   to the lab's ``/_lab/start``, which sets a random state cookie there and sends it back to the console's
   :func:`lab_handoff` with the state's digest.
2. :func:`lab_handoff` admits the owner again and answers with a redirect to the lab's ``/_lab/login``, carrying a
   handoff signed by the console: one use, a minute, and bound to that state, so it works only in the browser that
   began the entry (a link to a handoff logs nobody else in).
3. :func:`lab_application` — the ASGI application for lab hosts (``config/asgi.py`` routes them here, before
   Django). ``/_lab/login`` spends the handoff and sets the lab's own cookie: host-only, HttpOnly, signed, bound to
   the user, the instance, the user's password (a password change ends it) and the console session it was entered
   from (sealed with ``core.encryption``): signing out of the console ends it too. Every other request must
   carry that cookie; ownership and the instance's Jupyter server are looked up again every few seconds
   (``LAB_AUTH_CACHE_SECONDS``), so a released or transferred instance closes within that. What stays open (a
   kernel's, terminal's or exposed port's websocket, a long download) is looked up again, uncached, every
   ``ACCESS_RECHECK_SECONDS`` and closed once it no longer holds: a suspended account, a member who left the team or
   lost the role, signing out, a new password, or an instance stopping.

Requests go to the instance's Jupyter server (a Unix socket on the local backend, the address the agent reported on
Slurm) signed with the server's token in an ``Authorization`` header. The token never reaches the browser: it is cut
out of the text Jupyter sends (JupyterLab writes it into its page; the user's own files go on unscanned, see
:func:`_may_hold_token`). The browser's cookies and credentials never reach the machine, and the cookies Jupyter sets
stay inside the lab's path. Jupyter skips its own XSRF check for token-signed requests, so the proxy checks origins
instead: a websocket, and any request but GET, HEAD and OPTIONS, must come from the lab's own origin. Paths and
queries are forwarded unchanged, because the server's ``base_url`` is the lab path.

HTTP is answered at the ASGI level, not through Django's request cycle: a lab page loads hundreds of files, and each
one costs only the cookie check and the relay.
"""

import asyncio
import hashlib
import hmac
import re
import secrets
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from http import HTTPStatus
from http.cookies import CookieError, SimpleCookie
from importlib import import_module
from urllib.parse import parse_qs, urlencode, urlsplit, urlunsplit

import httpx
from asgiref.sync import sync_to_async
from django.conf import settings
from django.contrib.auth import SESSION_KEY, get_user_model
from django.contrib.auth.decorators import login_required
from django.core import signing
from django.core.cache import cache
from django.core.exceptions import PermissionDenied
from django.db import DatabaseError, close_old_connections
from django.http import Http404, HttpResponseRedirect
from django.http.cookie import parse_cookie
from django.http.request import split_domain_port
from django.shortcuts import render
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import translation
from django.utils.crypto import constant_time_compare
from django.utils.encoding import escape_uri_path
from django.utils.translation import gettext as _
from django.views.decorators.http import require_safe
from websockets.asyncio.client import ClientConnection, connect, unix_connect
from websockets.exceptions import ConnectionClosed, WebSocketException

from core import encryption
from core.errors import Forbidden, NotFound
from core.upstream import pooled_client

from .backends import JupyterServer, get_backend
from .backends.local import lab_path
from .choices import Status
from .lifecycle import get_instance

LAB_PATH = re.compile(r"^/instances/(?P<public_id>[^/]+)/lab/")
START_PATH = "/_lab/start"
LOGIN_PATH = "/_lab/login"
COOKIE_NAME = "gpucloud_lab"
STATE_COOKIE = "gpucloud_lab_state"
START_SALT = "instances.lab.start"
HANDOFF_SALT = "instances.lab.handoff"
COOKIE_SALT = "instances.lab.cookie"
HANDOFF_SECONDS = 60
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
# The browser's credentials are the lab's own cookie. Jupyter is signed in with its token and addressed as localhost
# (its host check refuses other names); its answers come uncompressed so the token can be cut out of them.
NOT_FORWARDED = HOP_BY_HOP | {"host", "cookie", "authorization", "origin", "accept-encoding", "content-length"}
# Headers that would act beyond the lab's path: other cookies, or transport security for the whole host name.
NOT_RETURNED = HOP_BY_HOP | {
    "content-length",
    "set-cookie",
    "strict-transport-security",
    "clear-site-data",
    "service-worker-allowed",
    "alt-svc",
}
TIMEOUT = httpx.Timeout(connect=5, read=600, write=60, pool=5)
WEBSOCKET_MAX_MESSAGE = 64 * 1024 * 1024  # a notebook output with large images; far above Jupyter's usual messages
# An instance whose machine is up or coming up; the lab of one stopping, stopped or released is closed.
LAB_STATES = frozenset({Status.CREATING, Status.STARTING, Status.RUNNING})


def lab_server(user, public_id) -> JupyterServer | None:
    """The Jupyter server of ``user``'s instance ``public_id`` (None while it has none, and once the instance is
    stopping, stopped or released, whatever its Jupyter still answers). Entering a machine is a change, not a view;
    anyone else's instance and a missing one raise the same NotFound."""
    try:
        instance = get_instance(user, public_id, "change")
    except Forbidden as exc:  # a team role that may only look at the instance does not enter it either
        raise NotFound(str(exc.message)) from exc
    if instance.status not in LAB_STATES:
        return None
    return get_backend(instance.backend_name).jupyter(instance)


# Lab origins -------------------------------------------------------------------------------------------------------


def lab_domain() -> str:
    return settings.LAB_DOMAIN.strip(".").lower()


def lab_label(host: str) -> str | None:
    """The instance a ``Host`` header names on the lab domain (``""`` for a malformed one); None for any other
    host, which is the console's."""
    name = split_domain_port(host)[0] if host else ""
    suffix = "." + lab_domain()
    if not name.endswith(suffix):
        return None
    label = name.removesuffix(suffix)
    return label if label and "." not in label else ""


def lab_origin(public_id, console_host: str, scheme: str) -> str:
    """The lab's origin, beside the console at ``console_host``: the instance's name on the lab domain, on the
    console's port."""
    port = split_domain_port(console_host)[1]
    return f"{scheme}://{public_id}.{lab_domain()}{':' + port if port else ''}"


# The console's side: the handoff --------------------------------------------------------------------------------


@require_safe
@login_required
def lab(request, public_id: str, path: str = ""):
    """``/instances/<id>/lab/…`` on the console: the owner is sent to the lab's origin to begin entering the same
    path there; someone signed out signs in first, anyone else gets 404."""
    instance, refusal = _enterable(request, public_id)
    if refusal is not None:
        return refusal
    query = request.META.get("QUERY_STRING", "")
    target = lab_path(instance.public_id) + escape_uri_path(path) + (f"?{query}" if query else "")
    start = signing.dumps({"p": target, "o": _console_origin(request)}, salt=START_SALT, compress=True)
    return _redirect(f"{lab_origin(instance.public_id, request.get_host(), request.scheme)}{START_PATH}?r={start}")


@require_safe
def lab_handoff(request, public_id: str):
    """The console's half of entering a lab: the lab's origin sent the browser back with the digest of a state
    cookie it set there; the owner gets a one-time handoff bound to that browser's cookie."""
    instance, refusal = _enterable(request, public_id)
    if refusal is not None:
        return refusal
    state, target = request.GET.get("s", ""), request.GET.get("p", "")
    # The lab's start sends the path it was given, percent-encoded: printable ASCII only, fit for a Location header.
    fits = re.fullmatch(r"[\x21-\x7e]+", target) and target.startswith(lab_path(instance.public_id))
    if not re.fullmatch(r"[0-9a-f]{64}", state) or not fits:
        raise Http404(_("No such instance."))
    handoff = signing.dumps(
        {
            "u": request.user.pk,
            "i": str(instance.public_id),
            "h": request.user.get_session_auth_hash(),
            "k": encryption.encrypt(request.session.session_key or ""),
            "n": secrets.token_urlsafe(16),
            "s": state,
            "p": target,
            "l": translation.get_language(),
            "o": _console_origin(request),
        },
        salt=HANDOFF_SALT,
        compress=True,
    )
    return _redirect(f"{lab_origin(instance.public_id, request.get_host(), request.scheme)}{LOGIN_PATH}?t={handoff}")


def _enterable(request, public_id):
    """The instance whose lab the request's user may enter now, or the page that says why not."""
    try:
        instance = get_instance(request.user, public_id, "change")
    except NotFound as exc:
        raise Http404(str(exc.message)) from exc
    except Forbidden as exc:
        raise PermissionDenied(str(exc.message)) from exc
    if get_backend(instance.backend_name).jupyter(instance) is None:
        message = _("JupyterLab is not running on this instance. It runs while the instance is running.")
        return instance, _unavailable_page(request, instance.public_id, 503, message)
    if lab_domain().endswith("localhost") and not _loopback(split_domain_port(request.get_host())[0]):
        # *.localhost reaches the browser's own machine: from anywhere else, the operator must name a lab domain.
        message = _(
            "JupyterLab opens on an address of its own, which this console has not been given for visitors from "
            "other machines. The operator sets LAB_DOMAIN to a wildcard domain that leads to the console."
        )
        return instance, _unavailable_page(request, instance.public_id, 503, message)
    return instance, None


def _console_origin(request) -> str:
    return f"{request.scheme}://{request.get_host()}"


def _redirect(url: str) -> HttpResponseRedirect:
    response = HttpResponseRedirect(url)
    response["Cache-Control"] = "no-store"
    response["Referrer-Policy"] = "no-referrer"
    return response


def _loopback(host: str) -> bool:
    return host in ("127.0.0.1", "::1", "[::1]", "localhost") or host.endswith(".localhost")


def _unavailable_page(request, public_id, status, message):
    context = {"public_id": public_id, "status": status, "message": message}
    return render(request, "instances/lab_unavailable.html", context, status=status)


# The lab's side ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Grant:
    """What a lab cookie admits: ``server`` (None while the instance has no Jupyter), for a while."""

    server: JupyterServer | None
    expires: float


_grants: dict[str, Grant] = {}
_GRANTS_KEPT = 4096


async def lab_application(scope, receive, send) -> None:
    """The ASGI application for every request to a lab host (``config/asgi.py`` routes them here)."""
    page = _Page(scope)
    if scope["type"] == "websocket":
        if (await receive())["type"] != "websocket.connect":
            return
        return await _websocket(scope, receive, send, page)
    if scope["type"] != "http":
        return
    if page.label and scope["path"] == START_PATH and scope["method"] == "GET":
        return await _start(scope, send, page)
    if page.label and scope["path"] == LOGIN_PATH and scope["method"] == "GET":
        return await _login(scope, send, page)
    match = LAB_PATH.match(scope["path"])
    if not page.label or not match or match["public_id"].lower() != page.label:
        return await page.error(send, 404)
    payload = page.cookie_payload()
    if payload is None:
        return await _no_cookie(scope, send, page)
    grant = await _grant(page.cookie, payload)
    if grant is None:  # its user signed out everywhere (a new password) or lost the instance: the console decides
        return await _no_cookie(scope, send, page)
    if grant.server is None:
        return await page.error(send, 503)
    if scope["method"] not in READ_METHODS and _header(scope, "origin") != page.origin:
        return await page.error(send, 403)
    if await _proxy(scope, receive, send, grant.server, lambda: _still_serves(page.cookie, payload, grant.server)):
        return
    # The server did not answer where the last look-up said: look again (the machine may have stopped, or moved).
    _forget(page.cookie)
    fresh = await _grant(page.cookie, payload)
    if fresh is None:
        return await _no_cookie(scope, send, page)
    if fresh.server is None:
        return await page.error(send, 503)
    moved = fresh.server != grant.server and scope["method"] in READ_METHODS and not _has_body(scope)
    if moved and await _proxy(
        scope, receive, send, fresh.server, lambda: _still_serves(page.cookie, payload, fresh.server)
    ):
        return
    _forget(page.cookie)
    await page.error(send, 502)


class _Page:
    """One request to a lab host: which instance it names, its origin, its lab cookie, and the pages it answers
    with in the user's language."""

    def __init__(self, scope):
        self.scope = scope
        host = _header(scope, "host")
        self.label = (lab_label(host) or "").lower()
        scheme = "https" if scope.get("scheme") in ("https", "wss") else "http"
        self.origin = f"{scheme}://{host.lower()}"
        self.secure = scheme == "https"
        self.cookie = parse_cookie(_header(scope, "cookie")).get(COOKIE_NAME, "")
        self._payload = None

    def cookie_payload(self) -> dict | None:
        """The signed, unexpired payload of the lab cookie, if it is for this instance."""
        if self._payload is None and self.cookie:
            try:
                payload = signing.loads(self.cookie, salt=COOKIE_SALT, max_age=settings.LAB_SESSION_SECONDS)
            except signing.BadSignature:
                return None
            if isinstance(payload, dict) and payload.get("i") == self.label:
                self._payload = payload
        return self._payload

    def expired_payload(self) -> dict | None:
        """The payload of a lab cookie the console signed for this instance, however old (to send its user back)."""
        try:
            payload = signing.loads(self.cookie, salt=COOKIE_SALT)
        except signing.BadSignature:
            return None
        return payload if isinstance(payload, dict) and payload.get("i") == self.label else None

    async def error(self, send, status: int, *, language: str = "") -> None:
        payload = self._payload or {}
        language = language or payload.get("l") or settings.LANGUAGE_CODE
        body = await sync_to_async(_error_page)(status, language, self.label, payload.get("o", ""))
        headers = [(b"content-type", b"text/html; charset=utf-8"), (b"cache-control", b"no-store")]
        await _respond(send, status, headers, body)


def _error_page(status: int, language: str, public_id: str, console: str) -> bytes:
    with translation.override(language if language in dict(settings.LANGUAGES) else settings.LANGUAGE_CODE):
        messages = {
            404: _("No such instance."),
            403: _("This request did not come from the instance's JupyterLab page."),
            502: _(
                "JupyterLab on this instance is not answering. It may still be starting, or it has stopped; "
                "try again in a moment."
            ),
            503: _("JupyterLab is not running on this instance. It runs while the instance is running."),
        }
        back = console + reverse("instances:detail", args=[public_id]) if console and public_id else ""
        context = {"status": status, "message": messages.get(status, HTTPStatus(status).phrase), "back": back}
        return render_to_string("instances/lab_error.html", context).encode()


async def _start(scope, send, page: _Page) -> None:
    """Begin entering the lab: a state cookie of this browser's on the lab's origin, and back to the console with its
    digest, which the console signs into the handoff. So a handoff opens the lab only in the browser that began
    the entry: a link to someone else's handoff logs nobody in to that lab."""
    values = parse_qs(scope.get("query_string", b"").decode("latin-1")).get("r") or [""]
    try:
        start = signing.loads(values[0], salt=START_SALT, max_age=HANDOFF_SECONDS)
    except signing.BadSignature:
        return await page.error(send, 404)
    if not isinstance(start, dict) or not str(start.get("p", "")).startswith(lab_path(page.label)):
        return await page.error(send, 404)
    state = secrets.token_urlsafe(32)
    back = reverse("instances:lab-handoff", args=[page.label])
    query = urlencode({"s": _digest(state), "p": start["p"]})
    headers = [
        (b"location", f"{start['o']}{back}?{query}".encode("latin-1")),
        (b"set-cookie", _cookie(STATE_COOKIE, state, HANDOFF_SECONDS * 2, page.secure).encode("latin-1")),
        (b"cache-control", b"no-store"),
        (b"referrer-policy", b"no-referrer"),
    ]
    await _respond(send, 302, headers, b"")


def _digest(state: str) -> str:
    return hashlib.sha256(state.encode()).hexdigest()


def _cookie(name: str, value: str, max_age: int, secure: bool) -> str:
    jar = SimpleCookie()
    jar[name] = value
    morsel = jar[name]
    morsel["path"], morsel["httponly"], morsel["samesite"], morsel["max-age"] = "/", True, "Lax", max_age
    if secure:
        morsel["secure"] = True
    return morsel.OutputString()


async def _login(scope, send, page: _Page) -> None:
    """Spend a handoff from the console, in the browser that began the entry: set the lab's cookie and go on to the
    page it was for."""
    values = parse_qs(scope.get("query_string", b"").decode("latin-1")).get("t") or [""]
    try:
        handoff = signing.loads(values[0], salt=HANDOFF_SALT, max_age=HANDOFF_SECONDS)
    except signing.BadSignature:
        return await page.error(send, 404)
    if (
        not isinstance(handoff, dict)
        or handoff.get("i") != page.label
        or not str(handoff.get("p", "")).startswith(lab_path(page.label))
    ):
        return await page.error(send, 404)
    state = parse_cookie(_header(scope, "cookie")).get(STATE_COOKIE, "")
    if not state or not hmac.compare_digest(_digest(state), str(handoff.get("s", ""))):
        return await page.error(send, 404, language=handoff.get("l", ""))  # another browser began this entry
    # One use: a handoff seen again (a copied link, a replayed request) admits nobody.
    if not await cache.aadd(f"lab-handoff:{handoff['n']}", 1, HANDOFF_SECONDS * 2):
        return await page.error(send, 404, language=handoff.get("l", ""))
    kept = {key: handoff[key] for key in ("u", "i", "h", "k", "l", "o")}
    cookie_value = signing.dumps(kept, salt=COOKIE_SALT, compress=True)
    if await _grant(cookie_value, kept) is None:
        return await page.error(send, 404, language=handoff.get("l", ""))
    headers = [
        (b"location", handoff["p"].encode("latin-1")),
        (b"set-cookie", _cookie(COOKIE_NAME, cookie_value, settings.LAB_SESSION_SECONDS, page.secure).encode()),
        (b"set-cookie", _cookie(STATE_COOKIE, "", 0, page.secure).encode()),
        (b"cache-control", b"no-store"),
        (b"referrer-policy", b"no-referrer"),
    ]
    await _respond(send, 302, headers, b"")


async def _no_cookie(scope, send, page: _Page) -> None:
    """A lab page opened without a valid cookie (a bookmark, an expired one, one whose user changed their password):
    a page load goes back through the console, which admits the owner again; anything else is refused."""
    payload = page.expired_payload() if page.cookie else None
    console = (payload or {}).get("o") or settings.SITE_URL.rstrip("/")
    if scope["method"] not in ("GET", "HEAD"):
        return await page.error(send, 404)
    target = scope.get("raw_path") or scope["path"].encode()
    query = scope.get("query_string", b"")
    location = console.encode("latin-1") + target + (b"?" + query if query else b"")
    await _respond(send, 302, [(b"location", location), (b"cache-control", b"no-store")], b"")


async def _grant(cookie: str, payload: dict, *, fresh: bool = False) -> Grant | None:
    """What the cookie admits, looked up at most every LAB_AUTH_CACHE_SECONDS (``fresh``: now); None for nobody."""
    now = time.monotonic()
    grant = _grants.get(cookie)
    if grant is not None and grant.expires > now and not fresh:
        return grant
    try:
        server = await sync_to_async(_authorize)(payload)
    except NotFound:
        _grants.pop(cookie, None)
        return None
    if len(_grants) >= _GRANTS_KEPT:
        for key in [key for key, kept in _grants.items() if kept.expires <= now] or list(_grants)[: _GRANTS_KEPT // 2]:
            _grants.pop(key, None)
    grant = Grant(server=server, expires=now + settings.LAB_AUTH_CACHE_SECONDS)
    _grants[cookie] = grant
    return grant


def _forget(cookie: str) -> None:
    _grants.pop(cookie, None)


def _authorize(payload: dict) -> JupyterServer | None:
    """The Jupyter server the payload's user may enter: an active user whose password has not changed since, still
    signed in to the console session the lab was entered from, and who may still change the instance. Raises
    NotFound otherwise."""
    close_old_connections()  # outside Django's request cycle nobody else closes a connection gone bad or old
    try:
        user = get_user_model().objects.filter(pk=payload.get("u"), is_active=True).first()
        if user is None or not constant_time_compare(user.get_session_auth_hash(), str(payload.get("h", ""))):
            raise NotFound(_("No such instance."))
        if not _console_session_alive(payload.get("k"), user):
            raise NotFound(_("No such instance."))
        return lab_server(user, payload.get("i"))
    finally:
        close_old_connections()


def _console_session_alive(sealed, user) -> bool:
    """Whether the console session a lab cookie was entered from is still ``user``'s, unexpired (signing out
    deletes it)."""
    try:
        key = encryption.decrypt(str(sealed or ""))
    except encryption.DecryptionError:
        return False
    if not key:
        return False
    session = import_module(settings.SESSION_ENGINE).SessionStore(session_key=key).load()
    return session.get(SESSION_KEY) == str(user.pk)


# HTTP -----------------------------------------------------------------------------------------------------------


async def _proxy(scope, receive, send, server: JupyterServer, still_admitted) -> bool:
    """Relay the request to ``server`` and its answer back; False, with nothing sent, when the server cannot be
    reached. An answer that streams for long (a download, a web app's event stream on an exposed port) is looked up
    again every ACCESS_RECHECK_SECONDS as it goes, and cut off (the connection dropped, so the browser sees it
    unfinished) once its cookie no longer admits."""
    client = pooled_client(timeout=TIMEOUT, socket=server.socket, origin=_upstream_origin(server))
    # A kept connection the server had just closed (it restarted, or timed it out) fails at once: a read is sent once
    # more, on a new connection. (A write is not: the server may have acted on it before the connection failed.)
    safe = scope["method"] in READ_METHODS and not _has_body(scope)
    retried = (httpx.RemoteProtocolError, httpx.ReadError) if safe else ()
    try:
        try:
            upstream = await client.send(_upstream_request(client, scope, receive, server), stream=True)
        except retried:
            upstream = await client.send(_upstream_request(client, scope, receive, server), stream=True)
    except httpx.HTTPError:
        return False
    try:
        text = _may_hold_token(scope["path"], server, upstream.headers.get("content-type", ""))
        headers = _returned_headers(upstream, server, keep_length=not text)
        await send({"type": "http.response.start", "status": upstream.status_code, "headers": headers})
        # Each read goes on as it came (up to core.upstream's read size): gathering reads into larger blocks
        # copied every byte once more and cost the console a fifth of its CPU on a download.
        chunks = upstream.aiter_raw()
        if text and server.token:
            chunks = _without(server.token.encode(), chunks)
        if scope["method"] != "HEAD":
            check_at = time.monotonic() + settings.ACCESS_RECHECK_SECONDS
            async for chunk in chunks:
                if time.monotonic() >= check_at:
                    if not await still_admitted():
                        return True
                    check_at = time.monotonic() + settings.ACCESS_RECHECK_SECONDS
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})
    except (httpx.HTTPError, OSError):
        pass  # the machine or the browser went away mid-answer: nothing more can be said to either
    finally:
        await upstream.aclose()
    return True


def _upstream_origin(server: JupyterServer) -> str:
    if not server.url:
        return "http://localhost"
    parts = urlsplit(server.url)
    return f"{parts.scheme}://{parts.netloc}"


def _target(scope) -> str:
    """The path and query as the browser sent them, percent-encoding included (the ASGI server's raw path)."""
    raw = scope.get("raw_path")
    path = raw.decode("latin-1") if raw else escape_uri_path(scope["path"])
    query = scope.get("query_string", b"").decode("latin-1")
    return f"{path}?{query}" if query else path


def _upstream_request(client, scope, receive, server: JupyterServer) -> httpx.Request:
    headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in scope["headers"]]
    named = {n.strip().lower() for k, v in headers if k.lower() == "connection" for n in v.split(",")}
    forwarded = [(k, v) for k, v in headers if k.lower() not in NOT_FORWARDED | named and v]
    forwarded += [("Authorization", f"token {server.token}"), ("Accept-Encoding", "identity")]
    length = _header(scope, "content-length")
    has_body = _has_body(scope)
    if length.isdigit() and has_body:
        forwarded.append(("Content-Length", length))
    return client.build_request(
        scope["method"],
        _upstream_origin(server) + _target(scope),
        headers=forwarded,
        content=_request_body(receive) if has_body else None,
    )


def _has_body(scope) -> bool:
    length = _header(scope, "content-length")
    return bool(length and length != "0") or "chunked" in _header(scope, "transfer-encoding").lower()


async def _request_body(receive) -> AsyncIterator[bytes]:
    """The browser's body as it arrives, with no limit of the console's (notebooks and uploads are the lab's)."""
    while True:
        message = await receive()
        if message["type"] != "http.request":
            raise httpx.ReadError("the browser went away")
        if message.get("body"):
            yield message["body"]
        if not message.get("more_body"):
            return


def _may_hold_token(path: str, server: JupyterServer, content_type: str) -> bool:
    """Whether the token is cut out of this answer. Jupyter writes it into the pages it renders (JupyterLab's page
    config), and any text of its own (pages, API answers, scripts) is scanned. Under ``files/`` Jupyter sends the
    bytes of the user's own files unchanged (downloads, often large): they go on unscanned, at full speed, as
    Jupyter never writes its token there; a file that holds it was put there by the machine's owner, who can read
    the token on the machine anyway."""
    if path.startswith(f"{server.base_path}files/"):
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


def _returned_headers(upstream, server: JupyterServer, *, keep_length: bool) -> list[tuple[bytes, bytes]]:
    named = {name.strip().lower() for name in upstream.headers.get("connection", "").split(",")}
    returned: list[tuple[bytes, bytes]] = []
    for name, value in upstream.headers.multi_items():
        lower = name.lower()
        if lower == "set-cookie":
            value = _kept_in_lab(value, server.base_path)
            if not value:
                continue
        elif lower == "location":
            value = _local(value, _upstream_origin(server))
        elif lower == "content-length" and not keep_length:
            continue
        elif lower in NOT_RETURNED - {"set-cookie", "content-length"} | named or lower.startswith("access-control-"):
            continue  # CORS answers too: a lab is only ever read by its own origin
        returned.append((lower.encode("latin-1"), value.encode("latin-1")))
    if not any(name == b"x-frame-options" for name, _value in returned):
        returned.append((b"x-frame-options", b"SAMEORIGIN"))
    return returned


def _kept_in_lab(header: str, base_path: str) -> str:
    """A cookie Jupyter sets, confined to the lab's path (whatever path or domain it named); never one named like the
    lab's or the console's own."""
    jar = SimpleCookie()
    try:
        jar.load(header)
    except CookieError:
        return ""
    kept = []
    own = {COOKIE_NAME, STATE_COOKIE, settings.SESSION_COOKIE_NAME, settings.CSRF_COOKIE_NAME}
    own.add(settings.LANGUAGE_COOKIE_NAME)
    for name, morsel in jar.items():
        if name not in own:  # the console's names too, should a deployment ever share cookies with its labs
            morsel["path"], morsel["domain"] = base_path, ""
            kept.append(morsel.OutputString())
    return kept[0] if len(kept) == 1 else ""


def _local(location: str, upstream_origin: str) -> str:
    """A redirect to the upstream's own address, as a path on the lab's origin."""
    parts = urlsplit(location)
    if parts.netloc and f"{parts.scheme}://{parts.netloc}" == upstream_origin:
        return urlunsplit(("", "", parts.path, parts.query, parts.fragment))
    return location


async def _respond(send, status: int, headers: list[tuple[bytes, bytes]], body: bytes) -> None:
    headers = [*headers, (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


# Websockets ------------------------------------------------------------------------------------------------------


async def _websocket(scope, receive, send, page: _Page) -> None:
    match = LAB_PATH.match(scope["path"])
    if not page.label or not match or match["public_id"].lower() != page.label:
        return await deny(scope, send, 404)
    if _header(scope, "origin") != page.origin:
        return await deny(scope, send, 403)
    payload = page.cookie_payload()
    grant = await _grant(page.cookie, payload) if payload else None
    if grant is None:
        return await deny(scope, send, 404)
    if grant.server is None:
        return await deny(scope, send, 503)
    try:
        upstream = await _connect(grant.server, scope)
    except (OSError, TimeoutError, WebSocketException):
        _forget(page.cookie)
        return await deny(scope, send, 502)
    try:
        await send({"type": "websocket.accept", "subprotocol": upstream.subprotocol})
        await _pump(receive, send, upstream, still_admitted=lambda: _still_serves(page.cookie, payload, grant.server))
    finally:
        await upstream.close()


async def _still_serves(cookie: str, payload: dict, server: JupyterServer) -> bool:
    """Whether the cookie still admits its user to ``server``, looked up now: the user, their console session, their
    right to change the instance (a team role that operates) and the instance's running Jupyter, as at entry. A
    database that cannot answer ends nothing: the next look-up decides."""
    try:
        grant = await _grant(cookie, payload, fresh=True)
    except DatabaseError:
        return True
    return grant is not None and grant.server == server


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


async def _connect(server: JupyterServer, scope) -> ClientConnection:
    options = {
        "additional_headers": {"Authorization": f"token {server.token}"},
        "subprotocols": scope.get("subprotocols") or None,
        "compression": None,  # a local socket: compressing costs CPU and saves nothing
        "max_size": WEBSOCKET_MAX_MESSAGE,
        "open_timeout": TIMEOUT.connect,
    }
    uri = "ws" + _upstream_origin(server).removeprefix("http") + _target(scope)
    if server.socket:
        return await unix_connect(server.socket, uri, **options)
    return await connect(uri, **options)


async def _pump(receive, send, upstream: ClientConnection, still_admitted) -> None:
    """Frames both ways, text as text and binary as binary, until either side closes; the browser learns the
    machine's close code. A kernel's, terminal's or exposed port's socket stays open for hours, so the cookie that
    opened it is looked up again every ACCESS_RECHECK_SECONDS, past the kept look-up: signing out, a new password, a
    suspended account, leaving the team or a role that no longer operates, and a stopped instance close it (1008)."""
    browser_gone, revoked = asyncio.Event(), asyncio.Event()
    from_browser = asyncio.create_task(_from_browser(receive, upstream, browser_gone))
    watcher = asyncio.create_task(_watch(still_admitted, upstream, revoked))
    try:
        async for data in upstream:
            await send({"type": "websocket.send", "bytes" if isinstance(data, bytes) else "text": data})
    except ConnectionClosed:
        pass
    except OSError:  # the ASGI server's "client disconnected"
        browser_gone.set()
    finally:
        from_browser.cancel()
        watcher.cancel()
    if not browser_gone.is_set():
        code = 1008 if revoked.is_set() else _close_code(upstream.close_code)
        await send({"type": "websocket.close", "code": code})


async def _watch(still_admitted, upstream: ClientConnection, revoked: asyncio.Event) -> None:
    while True:
        await asyncio.sleep(max(float(settings.ACCESS_RECHECK_SECONDS), 0.1))
        if not await still_admitted():
            revoked.set()
            await upstream.close()
            return


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
