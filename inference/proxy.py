"""The OpenAI-compatible face of endpoints: ``/v1/chat/completions``, ``/v1/completions`` and ``/v1/models``.

The console authenticates the endpoint's key (``Authorization: Bearer sk-…``; the key names its endpoint),
rate-limits it, and proxies the request to the endpoint's model server — streaming responses (SSE) are passed
through chunk by chunk. Every request is logged with its status, latency and token counts. Errors use OpenAI's
shape ``{"error": {"message", "type", "code"}}`` in the request's language (``accounts.middleware``).

The simulated backend has no machine and no model server: its endpoints are answered in-process by
:func:`simulated_answer`, a labelled simulated model, so the whole path works on a laptop. Where a request goes is
never taken from the request itself: a real upstream is the Unix socket the backend names for the instance (the
local backend's machines, like JupyterLab's) or the address it reported. ``/v1/models`` of a running endpoint with
a real upstream is the model server's own answer, so it names the model actually served.

The view is async: under the ASGI server a request waiting for the model server, or streaming its answer, holds no
thread. The database work (key, rate limit, wake-up, the request log) runs in Django's sync_to_async threads.
"""

import json
import logging
import time
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass
from urllib.parse import urljoin

import httpx
from asgiref.sync import sync_to_async
from django.core.handlers.asgi import ASGIRequest
from django.db import DatabaseError
from django.http import HttpResponse, JsonResponse, StreamingHttpResponse
from django.http.response import HttpResponseBase
from django.utils.translation import gettext as _
from django.views.decorators.csrf import csrf_exempt

from core.db import hand_back_connection
from core.errors import ServiceError
from core.jsonbody import InvalidJsonBody, parse_json_body
from core.upstream import async_client
from instances.choices import Status

from . import services as endpoints

log = logging.getLogger(__name__)

PROXIED = {"chat/completions", "completions"}
CONNECT_TIMEOUT = 5
READ_TIMEOUT = 300
TIMEOUT = httpx.Timeout(READ_TIMEOUT, connect=CONNECT_TIMEOUT)


def openai_error(status: int, message: str, *, type_: str, code: str, headers=None) -> JsonResponse:
    response = JsonResponse({"error": {"message": str(message), "type": type_, "code": code}}, status=status)
    for name, value in (headers or {}).items():
        response[name] = value
    return response


def _bearer(request) -> str:
    parts = request.headers.get("Authorization", "").split()
    return parts[1] if len(parts) == 2 and parts[0].lower() == "bearer" else ""


@dataclass(frozen=True)
class _Call:
    """A request admitted to a real model server: who asked, what, and where it goes."""

    endpoint: object
    key: object
    path: str
    url: str
    stream: bool
    started: float
    socket: str = ""
    method: str = "POST"


@csrf_exempt
async def v1(request, path: str):
    """Every ``/v1/<path>`` request: authenticate, rate-limit, wake a resting endpoint, then answer or proxy."""
    admitted = await sync_to_async(_admit)(request, path)
    if isinstance(admitted, HttpResponseBase):
        return admitted
    # The database's part is done: its connection goes back before the model server is asked, whose answer (a
    # stream, or a long generation) may take minutes; the request's log line borrows one again when it ends.
    await sync_to_async(hand_back_connection)()
    return await _proxy(request, admitted)


def _admit(request, path: str):
    """Everything before the model server is asked (the database's part): a response, or the call to make."""
    key = endpoints.authenticate_key(_bearer(request))
    if key is None:
        message = _("Invalid or revoked API key for this endpoint.")
        return openai_error(401, message, type_="invalid_request_error", code="invalid_api_key")
    if path not in PROXIED and path != "models":
        return openai_error(
            404, _("Unknown path /v1/%(path)s.") % {"path": path}, type_="invalid_request_error", code="unknown_url"
        )
    endpoint = key.endpoint
    if not endpoints.allow_request(key):
        endpoints.log_request(endpoint, key, path=path, status_code=429, latency_ms=0)
        limit = endpoints.rate_limit_per_minute()
        message = _("Rate limit reached: at most %(n)s requests per minute per key.") % {"n": limit}
        return openai_error(
            429, message, type_="rate_limit_error", code="rate_limit_exceeded", headers={"Retry-After": "60"}
        )
    endpoints.touch(endpoint)
    if path == "models":
        return _models(request, endpoint, key)
    if request.method != "POST":
        return openai_error(
            405,
            _("Use POST for /v1/%(path)s.") % {"path": path},
            type_="invalid_request_error",
            code="method_not_allowed",
        )
    if endpoint.instance.status != Status.RUNNING:
        return _not_running(endpoint)
    return _call(request, endpoint, key, path)


def _models(request, endpoint, key):
    upstream = endpoints.upstream(endpoint) if endpoint.instance.status == Status.RUNNING else None
    if upstream is not None and request.method == "GET":
        url = urljoin(upstream.base + "/", "models")
        return _Call(endpoint, key, "models", url, False, time.monotonic(), upstream.socket, "GET")
    created = int(endpoint.created_at.timestamp())
    model = {"id": endpoint.served_model, "object": "model", "created": created, "owned_by": "gpucloud"}
    return JsonResponse({"object": "list", "data": [model]})


def _not_running(endpoint):
    try:
        waking = endpoints.wake(endpoint)
    except ServiceError as exc:
        message = _("This endpoint is stopped and could not be started: %(reason)s") % {"reason": exc.message}
        return openai_error(503, message, type_="service_unavailable", code="endpoint_stopped")
    if waking:
        message = _("This endpoint is starting (it scales to zero when idle); try again in a few seconds.")
        return openai_error(
            503, message, type_="service_unavailable", code="endpoint_starting", headers={"Retry-After": "5"}
        )
    return openai_error(
        503, _("This endpoint is stopping or released."), type_="service_unavailable", code="endpoint_unavailable"
    )


def _call(request, endpoint, key, path):
    try:
        body = parse_json_body(request.body or b"{}")
    except InvalidJsonBody as exc:
        return openai_error(400, exc.message, type_="invalid_request_error", code="invalid_json")
    if not isinstance(body, dict):
        return openai_error(
            400, _("The request body must be a JSON object."), type_="invalid_request_error", code="invalid_json"
        )
    stream = bool(body.get("stream"))
    started = time.monotonic()
    if endpoints.is_simulated(endpoint):
        return _answer_simulated(endpoint, key, path, body, started)
    upstream = endpoints.upstream(endpoint)
    if upstream is None:
        return _Call(endpoint, key, path, "", stream, started)
    return _Call(endpoint, key, path, urljoin(upstream.base + "/", path), stream, started, upstream.socket)


async def _proxy(request, call: _Call):
    client = async_client(timeout=TIMEOUT, socket=call.socket)
    streams = call.stream
    try:
        if not call.url:
            raise httpx.ConnectError("the backend reported no model server")
        headers = {"Content-Type": "application/json", "Accept-Language": request.headers.get("Accept-Language", "")}
        body = request.body if call.method == "POST" else None
        upstream_request = client.build_request(call.method, call.url, content=body, headers=headers)
        upstream = await client.send(upstream_request, stream=True)
        streams = call.stream and upstream.status_code < 400
        if not streams:
            await upstream.aread()
    except httpx.HTTPError:
        await client.aclose()
        await _log(call, status_code=502, stream=call.stream)
        message = _(
            "The endpoint's model server is not answering; nothing was charged for this request. Try again shortly."
        )
        return openai_error(502, message, type_="upstream_error", code="upstream_unavailable")
    if streams:
        content_type = upstream.headers.get("Content-Type", "text/event-stream")
        chunks = _upstream_chunks(client, upstream)
        if not isinstance(request, ASGIRequest):
            # Under WSGI (the test client, runserver) Django reads the body on another event loop, after this one
            # has ended: read the stream here, whole.
            chunks = await _read_whole(chunks)
        return _stream(chunks, content_type, call.endpoint, call.key, call.path, call.started)
    await client.aclose()
    usage = {}
    try:
        usage = parse_json_body(upstream.content).get("usage") or {}
    except (ValueError, AttributeError):
        pass
    ok = upstream.status_code < 400
    await _log(call, status_code=upstream.status_code, usage=usage if ok else None, stream=call.stream)
    content_type = upstream.headers.get("Content-Type", "application/json")
    return HttpResponse(upstream.content, status=upstream.status_code, content_type=content_type)


async def _log(call: _Call, **fields) -> None:
    if call.path == "models":
        return  # listing the model is not a request to it (the log and the chart count those)
    await _log_request(call.endpoint, call.key, path=call.path, latency_ms=_ms(call.started), **fields)


async def _log_request(endpoint, key, **fields) -> None:
    """Write the request's log line (``endpoints.log_request``). The connection was handed back while the model
    answered, and one is borrowed again here: when none is free in time, the answer the model gave still reaches the
    client, and the missing line is logged instead."""
    try:
        await sync_to_async(endpoints.log_request)(endpoint, key, **fields)
    except DatabaseError:
        log.exception("the request log of endpoint %s was not written", endpoint.pk)


def _answer_simulated(endpoint, key, path, body, started):
    answer = simulated_answer(path, body)
    if isinstance(answer, dict):
        endpoints.log_request(endpoint, key, path=path, status_code=200, latency_ms=_ms(started), usage=answer["usage"])
        return JsonResponse(answer)
    return _stream(_replayed(answer), "text/event-stream", endpoint, key, path, started)


def _ms(started: float) -> float:
    return (time.monotonic() - started) * 1000


class _TokenCounter:
    """Token counts of a stream: the upstream's ``usage`` when it sends one, else one token per content chunk."""

    def __init__(self):
        self.buffer = b""
        self.usage = None
        self.chunks = 0

    def feed(self, data: bytes) -> None:
        self.buffer += data
        while b"\n" in self.buffer:
            line, self.buffer = self.buffer.split(b"\n", 1)
            self._line(line.strip())

    def _line(self, line: bytes) -> None:
        if not line.startswith(b"data:") or line[5:].strip() == b"[DONE]":
            return
        try:
            event = parse_json_body(line[5:])
        except ValueError:
            return
        if isinstance(event, dict):
            if event.get("usage"):
                self.usage = event["usage"]
            if event.get("choices"):
                self.chunks += 1

    def result(self) -> dict:
        return self.usage or {"prompt_tokens": 0, "completion_tokens": self.chunks}


class _UpstreamGone(Exception):
    """The model server went away in the middle of a stream."""


async def _upstream_chunks(client, upstream) -> AsyncIterator[bytes]:
    try:
        # Each piece as it arrives (decoded as requests did), so the client sees every token when the server sends it.
        async for chunk in upstream.aiter_bytes():
            yield chunk
    except httpx.HTTPError as exc:
        raise _UpstreamGone from exc
    finally:
        await upstream.aclose()
        await client.aclose()


async def _read_whole(chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """The chunks read now, to be replayed later, ending as the upstream ended (gone or not)."""
    pieces, gone = [], None
    try:
        async for chunk in chunks:
            pieces.append(chunk)
    except _UpstreamGone as exc:
        gone = exc
    return _replayed(pieces, gone)


async def _replayed(chunks: Iterable[bytes], error: Exception | None = None) -> AsyncIterator[bytes]:
    for chunk in chunks:
        yield chunk
    if error is not None:
        raise error


def _stream(pieces: AsyncIterator[bytes], content_type: str, endpoint, key, path, started):
    """Pass a stream of server-sent events through to the client, counting tokens, and log it when it ends."""
    counter = _TokenCounter()

    async def chunks():
        status = 200
        try:
            async for data in pieces:
                counter.feed(data)
                yield data
        except _UpstreamGone:
            status = 502
        finally:
            await _log_request(
                endpoint,
                key,
                path=path,
                status_code=status,
                latency_ms=_ms(started),
                usage=counter.result(),
                stream=True,
            )

    response = StreamingHttpResponse(chunks(), content_type=content_type)
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"
    return response


# The simulated model -----------------------------------------------------------------------------------------

SIMULATED_REPLY = "This is a simulated model on the GPU cloud console: no real inference ran. You said: {prompt}"


def _prompt_of(body: dict) -> str:
    if isinstance(body.get("messages"), list):
        for message in reversed(body["messages"]):
            if isinstance(message, dict) and message.get("role") == "user":
                return str(message.get("content", ""))
    return str(body.get("prompt", ""))


def simulated_answer(path: str, body: dict):
    """What the simulated model answers to ``body`` on ``path``: an OpenAI-shaped dict, or (``stream``) the
    server-sent events as bytes. Its text says it is a simulated model."""
    prompt = _prompt_of(body)[:200]
    words = SIMULATED_REPLY.format(prompt=prompt).split(" ")
    usage = {"prompt_tokens": len(prompt.split()), "completion_tokens": len(words)}
    usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
    chat = path == "chat/completions"
    model = str(body.get("model") or "simulated")
    base = {"id": f"sim-{int(time.time() * 1000)}", "created": int(time.time()), "model": model}
    if not body.get("stream"):
        text = " ".join(words)
        choice = {"index": 0, "finish_reason": "stop"}
        choice |= {"message": {"role": "assistant", "content": text}} if chat else {"text": text}
        kind = "chat.completion" if chat else "text_completion"
        return base | {"object": kind, "choices": [choice], "usage": usage}

    def events():
        kind = "chat.completion.chunk" if chat else "text_completion"
        for index, word in enumerate(words):
            piece = word if index == 0 else " " + word
            choice = {"index": 0, "finish_reason": None}
            choice |= {"delta": {"content": piece}} if chat else {"text": piece}
            yield f"data: {json.dumps(base | {'object': kind, 'choices': [choice]})}\n\n".encode()
        yield f"data: {json.dumps(base | {'object': kind, 'choices': [], 'usage': usage})}\n\n".encode()
        yield b"data: [DONE]\n\n"

    return events()
