"""A stand-in for an instance's Jupyter server, as an ASGI application to serve on a Unix socket (the proxy's
tests; its benchmark runs a real JupyterLab). Like Jupyter it answers under its ``base_url`` only and refuses any
request without ``Authorization: token <token>`` (403); it records what it was sent.

Under the base path: ``api/status`` (Jupyter's JSON), ``lab`` (a page with the token in its page config, as
JupyterLab writes it, and the cookies and headers Jupyter sets), ``files/<n>`` (n bytes), ``api/echo`` (the digest
of the request body), ``redirect`` (to ``lab`` by the server's own address), ``events`` (an event stream, as a web
app on an exposed port sends: a line every fifth of a second, for ever); a websocket anywhere echoes every frame with
the subprotocol the client offered first.
"""

import asyncio
import hashlib
import json
import secrets

STATUS = {
    "started": "2026-01-01T00:00:00.000000Z",
    "last_activity": "2026-01-01T00:00:00Z",
    "connections": 0,
    "kernels": 0,
}
BLOCK = 64 * 1024


class FakeJupyter:
    def __init__(self, base_path: str):
        self.base_path = base_path
        self.token = secrets.token_hex(24)
        self.requests: list[dict] = []

    async def __call__(self, scope, receive, send):
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        headers = {key.decode().lower(): value.decode() for key, value in scope["headers"]}
        self.requests.append(
            {
                "type": scope["type"],
                "method": scope.get("method", ""),
                "path": scope["path"],
                "query": scope["query_string"].decode(),
                "headers": headers,
            }
        )
        signed = headers.get("authorization") == f"token {self.token}"
        if scope["type"] == "websocket":
            await self._websocket(scope, receive, send, signed)
        elif not signed:
            await _answer(send, 403, b'{"message": "Forbidden"}', "application/json")
        else:
            await self._http(scope, receive, send)

    async def _http(self, scope, receive, send):
        route = scope["path"].removeprefix(self.base_path)
        if route == "api/status":
            await _answer(send, 200, json.dumps(STATUS).encode(), "application/json")
        elif route == "lab":
            await self._page(send)
        elif route.startswith("files/") and route[6:].isdigit():
            await _download(send, int(route[6:]))
        elif route == "api/echo":
            digest, length = hashlib.sha256(), 0
            while True:
                message = await receive()
                digest.update(message.get("body", b""))
                length += len(message.get("body", b""))
                if not message.get("more_body"):
                    break
            body = json.dumps({"length": length, "sha256": digest.hexdigest()}).encode()
            await _answer(send, 200, body, "application/json")
        elif route == "events":
            await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
            number = 0
            while True:
                await send({"type": "http.response.body", "body": f"event {number}\n".encode(), "more_body": True})
                number += 1
                try:
                    if (await asyncio.wait_for(receive(), 0.2))["type"] == "http.disconnect":
                        return
                except TimeoutError:
                    pass
        elif route == "redirect":
            await _answer(
                send, 302, b"", "text/plain", [(b"location", f"http://localhost{self.base_path}lab".encode())]
            )
        else:
            await _answer(send, 404, b'{"message": "Not Found"}', "application/json")

    async def _page(self, send):
        config = json.dumps({"baseUrl": self.base_path, "token": self.token, "appVersion": "4.6.6"})
        page = f'<!doctype html><html><head><script id="jupyter-config-data" type="application/json">{config}'
        page += "</script></head><body>JupyterLab</body></html>"
        headers = [
            (b"set-cookie", b"_xsrf=2|1a2b3c4d|5e6f7a8b|1767225600; Path=/"),
            (b"set-cookie", b"username-localhost=2|abc|def; Domain=localhost; Path=/; HttpOnly"),
            (b"set-cookie", b"sessionid=from-the-machine; Path=/"),
            (b"content-security-policy", b"frame-ancestors 'self'; report-uri /api/security/csp-report"),
            (b"access-control-allow-origin", b"*"),
            (b"strict-transport-security", b"max-age=0"),
        ]
        await _answer(send, 200, page.encode(), "text/html; charset=UTF-8", headers)

    async def _websocket(self, scope, receive, send, signed: bool):
        await receive()  # websocket.connect
        if not signed:
            await send({"type": "websocket.close", "code": 1008})
            return
        offered = scope.get("subprotocols") or []
        await send({"type": "websocket.accept", "subprotocol": offered[0] if offered else None})
        while (message := await receive())["type"] == "websocket.receive":
            if message.get("text") == "close please":
                await send({"type": "websocket.close", "code": 4001})
                return
            payload = {"bytes": message["bytes"]} if message.get("bytes") is not None else {"text": message["text"]}
            await send({"type": "websocket.send", **payload})


async def _answer(send, status: int, body: bytes, content_type: str, headers=()):
    all_headers = [(b"content-type", content_type.encode()), (b"content-length", str(len(body)).encode()), *headers]
    await send({"type": "http.response.start", "status": status, "headers": all_headers})
    await send({"type": "http.response.body", "body": body})


async def _download(send, size: int):
    headers = [(b"content-type", b"application/octet-stream"), (b"content-length", str(size).encode())]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    block = bytes(range(256)) * (BLOCK // 256)
    for start in range(0, size, BLOCK):
        await send({"type": "http.response.body", "body": block[: size - start], "more_body": True})
    await send({"type": "http.response.body", "body": b""})
