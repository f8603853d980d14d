"""Fixtures for inference endpoints: the hub, images and templates loaded, a funded owner, and a real
OpenAI-compatible HTTP server in a thread (127.0.0.1, random port) that streams its chunks with delays."""

import json
import threading
import time
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from asgiref.sync import async_to_sync

from billing import wallet
from inference import services as endpoints
from inference import template_catalog as inference
from instances.models import Instance
from instances.tests.fixtures import settle
from tests.fixtures.catalog import load_hub


@pytest.fixture
def inference_catalog(catalog):
    """Chips, prices, the official images (``catalog`` from the image fixtures), the hub and the templates."""

    load_hub()
    inference.load()
    return catalog


def fund(user, amount="500") -> None:
    wallet.adjust_balance(
        user=user, amount=Decimal(amount), reason="tests", staff=None, idempotency_key=f"tests:{user.pk}:{amount}"
    )


@pytest.fixture
def deploy(inference_catalog, instant, eager_tasks):
    """``deploy(user, template=…)``: a funded user's endpoint, running (tasks run eagerly, zero timings)."""

    def run(user, template="qwen2.5-0.5b-instruct-vllm", **fields):
        fund(user)
        endpoint = endpoints.deploy(user, endpoints.DeployRequest(template=template, **fields))
        settle()
        endpoint.instance.refresh_from_db()
        return endpoint

    return run


class FakeModelServer:
    """What a vLLM server looks like from the console: JSON answers with ``usage``, or SSE chunks with delays.
    ``last_chunk_gate`` holds the last chunk back until a test releases it."""

    def __init__(self, chunks=("Hello", " from", " a", " real", " upstream")):
        self.chunks = chunks
        self.last_chunk_gate = threading.Event()
        self.last_chunk_sent = threading.Event()
        self.requests: list[dict] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                server.requests.append({"path": self.path, "body": body})
                if body.get("stream"):
                    self._stream()
                else:
                    self._json()

            def _json(self):
                payload = json.dumps(
                    {
                        "id": "cmpl-1",
                        "object": "chat.completion",
                        "model": "real",
                        "choices": [{"index": 0, "message": {"role": "assistant", "content": "".join(server.chunks)}}],
                        "usage": {"prompt_tokens": 7, "completion_tokens": 5, "total_tokens": 12},
                    }
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def _send_chunk(self, data: bytes):
                self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                self.wfile.flush()

            def _stream(self):
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                for index, piece in enumerate(server.chunks):
                    if index == len(server.chunks) - 1:
                        server.last_chunk_gate.wait(timeout=10)
                    event = {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": piece}}]}
                    self._send_chunk(f"data: {json.dumps(event)}\n\n".encode())
                    time.sleep(0.05)
                server.last_chunk_sent.set()
                self._send_chunk(b"data: [DONE]\n\n")
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"


@pytest.fixture
def model_server():
    server = FakeModelServer()
    server.thread.start()
    yield server
    server.last_chunk_gate.set()
    server.httpd.shutdown()
    server.httpd.server_close()


def streamed_chunks(response) -> list[bytes]:
    """The chunks of a streaming answer read through the sync test client (the proxy's streams are asynchronous)."""

    async def read():
        return [chunk async for chunk in response.streaming_content]

    return async_to_sync(read)()


def point_at(endpoint, url: str) -> None:
    """Make ``endpoint``'s instance report ``url`` as its model server (what a real backend does)."""
    Instance.objects.filter(pk=endpoint.instance_id).update(access={"inference_url": url})
    endpoint.instance.access = {"inference_url": url}
