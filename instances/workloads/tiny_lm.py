"""Inside a local-backend endpoint: an OpenAI-compatible server for the tiny demo model, on a Unix socket.

    python tiny_lm.py --socket /run/gpucloud/model.sock [--model FILE] [--served-model-name NAME]

The machine has no network; the console reaches this socket from outside (the machine's socket folder) and proxies
``/v1/…`` to it, after checking the endpoint's key. It answers ``GET /v1/models`` (the model it serves),
``POST /v1/chat/completions`` and ``POST /v1/completions``, with ``stream: true`` (server-sent events, then
``data: [DONE]``) or without, with usage counts (a token is a character), and errors in OpenAI's shape. The model
(``ngram.py``, beside this file) is the one trained into the runtime when it was installed: by default
``<the runtime's prefix>/models/ngram-zh-en-tiny.json``. Standard library only.
"""

import argparse
import json
import os
import secrets
import socketserver
import sys
import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path

from ngram import NgramModel

DEFAULT_MODEL = Path(sys.prefix) / "models" / "ngram-zh-en-tiny.json"
DEFAULT_MAX_TOKENS = 64
MAX_TOKENS = 2048
MAX_BODY = 1024 * 1024


class BadRequest(Exception):
    """An answer in OpenAI's error shape: ``{"error": {"message", "type", "param", "code"}}``."""

    def __init__(self, message: str, *, status: int = 400, param=None, code=None, type_="invalid_request_error"):
        super().__init__(message)
        self.status, self.param, self.code, self.type = status, param, code, type_

    def body(self) -> dict:
        return {"error": {"message": str(self), "type": self.type, "param": self.param, "code": self.code}}


# What a request asks for -------------------------------------------------------------------------------------


def _text_of(content, param: str) -> str:
    """A message's content: a string, or OpenAI's list of parts of which the text ones count."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text") for p in content if isinstance(p, dict) and p.get("type") == "text"]
        if all(isinstance(p, str) for p in parts):
            return "".join(parts)
    raise BadRequest(f"'{param}' must be a string or a list of text parts.", param=param)


def chat_prompt(body: dict) -> tuple[str, str]:
    """The whole conversation's text (what usage counts) and the context the answer continues: the last user
    message."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise BadRequest("'messages' must be a non-empty list.", param="messages")
    texts, last_user = [], ""
    for index, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise BadRequest(f"messages[{index}] must be an object with a 'role'.", param=f"messages[{index}]")
        text = _text_of(message.get("content", ""), f"messages[{index}].content")
        texts.append(text)
        if message["role"] == "user":
            last_user = text
    return "\n".join(texts), last_user or texts[-1]


def completion_prompt(body: dict) -> tuple[str, str]:
    prompt = body.get("prompt", "")
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
        prompt = prompt[0]
    if not isinstance(prompt, str):
        raise BadRequest("'prompt' must be a string.", param="prompt")
    return prompt, prompt


def _number(body: dict, name: str, default, low, high, kind=(int, float)):
    value = body.get(name)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, kind) or not low <= value <= high:
        raise BadRequest(f"'{name}' must be a number from {low} to {high}.", param=name)
    return value


def sampling(body: dict) -> dict:
    """max_tokens, temperature, seed and stop strings, checked."""
    max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
    stop = body.get("stop") or ()
    if isinstance(stop, str):
        stop = (stop,)
    if not isinstance(stop, list | tuple) or not all(isinstance(s, str) for s in stop) or len(stop) > 4:
        raise BadRequest("'stop' must be a string or a list of at most 4 strings.", param="stop")
    if body.get("n", 1) != 1:
        raise BadRequest("This model answers with one choice: 'n' must be 1.", param="n")
    return {
        "max_tokens": _number({"max_tokens": max_tokens}, "max_tokens", DEFAULT_MAX_TOKENS, 1, MAX_TOKENS, int),
        "temperature": float(_number(body, "temperature", 1.0, 0, 2)),
        "seed": _number(body, "seed", None, -(2**63), 2**63 - 1, int),
        "stop": tuple(stop),
    }


# Answers -----------------------------------------------------------------------------------------------------


class Server:
    """The model and the name it is served as; makes the OpenAI-shaped answers."""

    def __init__(self, model: NgramModel, served_name: str):
        self.model = model
        self.served_name = served_name
        self.created = int(time.time())

    def models(self) -> dict:
        entry = {
            "id": self.served_name,
            "object": "model",
            "created": self.created,
            "owned_by": "gpucloud",
            "root": self.model.name,
        }
        return {"object": "list", "data": [entry]}

    def check_model(self, body: dict) -> None:
        asked = body.get("model")
        if asked is not None and asked not in (self.served_name, self.model.name):
            raise BadRequest(
                f"The model '{asked}' does not exist; this server serves '{self.served_name}'.",
                status=404,
                param="model",
                code="model_not_found",
            )

    def request(self, chat: bool, body: dict):
        """Check ``body`` and return (whole prompt, context, sampling, stream, base of every answer)."""
        if not isinstance(body, dict):
            raise BadRequest("The request body must be a JSON object.")
        self.check_model(body)
        prompt, context = chat_prompt(body) if chat else completion_prompt(body)
        options = sampling(body)
        if options["seed"] is None:
            options["seed"] = secrets.randbits(32)
        stream = body.get("stream", False)
        if not isinstance(stream, bool):
            raise BadRequest("'stream' must be true or false.", param="stream")
        prefix = "chatcmpl" if chat else "cmpl"
        base = {"id": f"{prefix}-{secrets.token_hex(12)}", "created": int(time.time()), "model": self.served_name}
        return prompt, context, options, stream, base

    def usage(self, prompt: str, produced: int) -> dict:
        return {"prompt_tokens": len(prompt), "completion_tokens": produced, "total_tokens": len(prompt) + produced}

    def answer(self, chat: bool, body: dict) -> dict:
        prompt, context, options, _stream, base = self.request(chat, body)
        pieces = self.model.generate(context, **options)
        text, reason = _drain(pieces)
        choice = {"index": 0, "finish_reason": reason, "logprobs": None}
        choice |= {"message": {"role": "assistant", "content": text}} if chat else {"text": text}
        kind = "chat.completion" if chat else "text_completion"
        return base | {"object": kind, "choices": [choice], "usage": self.usage(prompt, len(text))}

    def events(self, chat: bool, prompt: str, context: str, options: dict, base: dict):
        """The server-sent events of a streamed answer, as bytes, ending with ``data: [DONE]``."""
        kind = "chat.completion.chunk" if chat else "text_completion"

        def event(choices, **extra) -> bytes:
            payload = json.dumps(base | {"object": kind, "choices": choices} | extra, ensure_ascii=False)
            return f"data: {payload}\n\n".encode()

        if chat:
            yield event([{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}])
        pieces = self.model.generate(context, **options)
        produced = 0
        while True:
            try:
                char = next(pieces)
            except StopIteration as end:
                reason = end.value
                break
            produced += 1
            delta = {"delta": {"content": char}} if chat else {"text": char}
            yield event([{"index": 0, "finish_reason": None, **delta}])
        last = {"delta": {}} if chat else {"text": ""}
        yield event([{"index": 0, "finish_reason": reason, **last}])
        yield event([], usage=self.usage(prompt, produced))
        yield b"data: [DONE]\n\n"


def _drain(pieces) -> tuple[str, str]:
    text = []
    while True:
        try:
            text.append(next(pieces))
        except StopIteration as end:
            return "".join(text), end.value


# HTTP over the socket ----------------------------------------------------------------------------------------


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "gpucloud-tiny-lm/1"
    ROUTES = {"/v1/chat/completions": True, "/v1/completions": False}

    def address_string(self) -> str:
        return "socket"  # a Unix socket's peer has no address

    def log_message(self, format, *args):  # noqa: A002 - the base class's name
        sys.stderr.write(f"{self.log_date_time_string()} {format % args}\n")

    def do_GET(self):
        if self._path() == "/v1/models":
            return self._json(200, self.server.app.models())
        if self._path() in self.ROUTES:
            return self._error(BadRequest("Use POST for this path.", status=405, code="method_not_allowed"))
        return self._error(BadRequest(f"Unknown path {self._path()}.", status=404, code="unknown_url"))

    def do_POST(self):
        path = self._path()
        if path not in self.ROUTES:
            status, code = (405, "method_not_allowed") if path == "/v1/models" else (404, "unknown_url")
            return self._error(BadRequest(f"POST is not served at {path}.", status=status, code=code))
        try:
            body = self._body()
            prompt, context, options, stream, base = self.server.app.request(self.ROUTES[path], body)
        except BadRequest as exc:
            return self._error(exc)
        if not stream:
            return self._json(200, self.server.app.answer(self.ROUTES[path], body))
        self._stream(self.server.app.events(self.ROUTES[path], prompt, context, options, base))

    def _path(self) -> str:
        return self.path.split("?", 1)[0]

    def _body(self):
        try:
            length = int(self.headers.get("Content-Length", "0"))
        except ValueError:
            raise BadRequest("Content-Length must be a number.") from None
        if not 0 <= length <= MAX_BODY:
            raise BadRequest("The request body is too large.", status=413)
        try:
            return json.loads(self.rfile.read(length) or b"null")
        except (ValueError, UnicodeDecodeError):
            raise BadRequest("The request body is not valid JSON.", code="invalid_json") from None

    def _json(self, status: int, payload: dict) -> None:
        data = json.dumps(payload, ensure_ascii=False).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _error(self, exc: BadRequest) -> None:
        self._json(exc.status, exc.body())

    def _stream(self, events) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            for data in events:
                self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client went away in the middle: nothing more to send


class UnixServer(socketserver.ThreadingUnixStreamServer):
    daemon_threads = True

    def __init__(self, path: str, app: Server):
        self.app = app
        super().__init__(path, Handler)


def serve(socket_path: str, app: Server) -> UnixServer:
    """Bind the socket (replacing a stale one, readable by its owner only) and return the server, not yet serving."""
    Path(socket_path).unlink(missing_ok=True)  # a previous run's: the machine's folder is its own
    old = os.umask(0o177)
    try:
        return UnixServer(socket_path, app)
    finally:
        os.umask(old)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--socket", required=True)
    parser.add_argument("--model", default=str(DEFAULT_MODEL))
    parser.add_argument("--served-model-name", default="")
    args = parser.parse_args(argv)
    model = NgramModel.load(Path(args.model))
    app = Server(model, args.served_model_name or model.name.split("/")[-1])
    server = serve(args.socket, app)
    sys.stderr.write(f"serving {model.name} as {app.served_name} on {args.socket}\n")
    sys.stderr.flush()
    server.serve_forever()


if __name__ == "__main__":
    main()
