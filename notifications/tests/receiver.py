"""A real HTTP server on 127.0.0.1, in a thread, that records what the console POSTs to it.

Each request is kept with its path, query, headers and raw body; the status it answers is set per test (a 500 to
exercise the retries, 200 otherwise).
"""

import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit


@dataclass
class Received:
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes


class Receiver:
    def __init__(self):
        self.requests: list[Received] = []
        self.status = 200
        self.reply = b'{"errcode":0,"errmsg":"ok"}'
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 (http.server's name)
                length = int(self.headers.get("Content-Length") or 0)
                parts = urlsplit(self.path)
                receiver.requests.append(
                    Received(parts.path, parse_qs(parts.query), dict(self.headers.items()), self.rfile.read(length))
                )
                self.send_response(receiver.status)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(receiver.reply)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def url(self, path: str = "/hook") -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}{path}"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()
