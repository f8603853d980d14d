"""The tiny demo model that CPU-only endpoints serve, and its OpenAI-compatible server on a Unix socket, run as a
machine runs it (its own process, the model file trained as the runtime's install trains it)."""

import http.client
import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from instances.runtime import tiny_model
from instances.workloads.ngram import NgramModel

SERVER = Path(__file__).resolve().parents[1] / "workloads" / "tiny_lm.py"


@pytest.fixture(scope="module")
def model_file(tmp_path_factory) -> Path:
    return tiny_model.install(tmp_path_factory.mktemp("runtime"))


@pytest.fixture(scope="module")
def model(model_file) -> NgramModel:
    return NgramModel.load(model_file)


def _cjk(text: str) -> int:
    return sum("\u4e00" <= c <= "\u9fff" for c in text)


def test_the_model_is_trained_from_chinese_and_english_text_into_a_small_file(model_file, model):
    assert model.name == "gpucloud/ngram-zh-en-tiny"
    assert 100_000 < model.trained_on < 1_000_000
    assert 50_000 < model_file.stat().st_size < 1_000_000
    assert model_file.stat().st_mode & 0o004  # every machine's user reads it


def test_installing_again_keeps_the_trained_file(model_file):
    before = model_file.stat().st_mtime_ns
    assert tiny_model.install(model_file.parent.parent) == model_file
    assert model_file.stat().st_mtime_ns == before


def test_the_same_seed_gives_the_same_text_and_another_seed_another(model):
    def text(seed):
        return "".join(model.generate("您的余额", max_tokens=40, seed=seed))

    assert text(7) == text(7)
    assert text(7) != text(8)


def test_the_answer_continues_the_prompts_language(model):
    # Over a few seeds, each answer on its own: one may wander into the other language, as the training text does at
    # times, and each ends where the text it learnt from ends a sentence.
    def answers(prompt):
        return ["".join(model.generate(prompt, max_tokens=30, seed=s, temperature=0.5)) for s in range(10)]

    def share_not_ascii(text):
        return sum(not c.isascii() for c in text) / max(len(text), 1)

    chinese = [a for a in answers("您的余额不足") if share_not_ascii(a) > 0.6 and _cjk(a) >= 3]
    assert len(chinese) >= 8, chinese
    assert all(share_not_ascii(a) < 0.1 for a in answers("The instance "))


def test_the_answer_stops_at_max_tokens_and_says_why(model):
    pieces = model.generate("Return the", max_tokens=5, seed=1)
    produced = []
    with pytest.raises(StopIteration) as end:
        while True:
            produced.append(next(pieces))
    assert len(produced) == 5 and end.value.value == "length"


# The server, over its socket --------------------------------------------------------------------------------


class UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path: str):
        super().__init__("localhost", timeout=10)
        self.socket_path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(10)
        self.sock.connect(self.socket_path)


@pytest.fixture(scope="module")
def server(model_file, tmp_path_factory):
    path = str(tmp_path_factory.mktemp("sockets") / "model.sock")
    process = subprocess.Popen(
        [sys.executable, str(SERVER), "--socket", path, "--model", str(model_file)], stderr=subprocess.PIPE
    )
    deadline = time.monotonic() + 10
    while not Path(path).exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    yield path
    process.kill()
    process.wait()


def call(path: str, method: str, target: str, body=None, raw: bytes | None = None):
    connection = UnixHTTPConnection(path)
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    connection.request(method, target, body=data, headers={"Content-Type": "application/json"})
    response = connection.getresponse()
    content = response.read()
    connection.close()
    return response, content


def test_the_server_lists_the_model_it_serves(server):
    response, content = call(server, "GET", "/v1/models")
    assert response.status == 200
    (model,) = json.loads(content)["data"]
    assert model["id"] == "ngram-zh-en-tiny" and model["root"] == "gpucloud/ngram-zh-en-tiny"


def test_a_chat_completion_answers_with_the_models_text_and_usage(server):
    body = {"model": "ngram-zh-en-tiny", "messages": [{"role": "user", "content": "您的实例"}], "max_tokens": 12}
    response, content = call(server, "POST", "/v1/chat/completions", body | {"seed": 3})
    answer = json.loads(content)
    assert response.status == 200 and answer["object"] == "chat.completion"
    text = answer["choices"][0]["message"]["content"]
    assert text and answer["choices"][0]["message"]["role"] == "assistant"
    assert answer["usage"] == {"prompt_tokens": 4, "completion_tokens": len(text), "total_tokens": 4 + len(text)}
    # the same seed, the same answer
    again = json.loads(call(server, "POST", "/v1/chat/completions", body | {"seed": 3})[1])
    assert again["choices"] == answer["choices"]


def test_a_streamed_completion_sends_events_then_done(server):
    body = {"prompt": "The instance ", "stream": True, "max_tokens": 6, "seed": 1}
    response, content = call(server, "POST", "/v1/completions", body)
    assert response.status == 200 and response.getheader("Content-Type") == "text/event-stream"
    lines = [line for line in content.decode().split("\n\n") if line]
    assert all(line.startswith("data: ") for line in lines) and lines[-1] == "data: [DONE]"
    events = [json.loads(line[6:]) for line in lines[:-1]]
    text = "".join(e["choices"][0]["text"] for e in events if e["choices"])
    assert len(text) == 6
    assert events[-1]["usage"]["completion_tokens"] == 6
    assert [e["choices"][0]["finish_reason"] for e in events if e["choices"]][-1] == "length"


def test_a_streamed_chat_opens_with_the_assistants_role(server):
    body = {"messages": [{"role": "user", "content": "hello"}], "stream": True, "max_tokens": 3}
    _response, content = call(server, "POST", "/v1/chat/completions", body)
    first = json.loads(content.decode().split("\n\n")[0][6:])
    assert first["object"] == "chat.completion.chunk" and first["choices"][0]["delta"]["role"] == "assistant"


@pytest.mark.parametrize(
    "path, body, status, param",
    [
        ("/v1/chat/completions", {"messages": []}, 400, "messages"),
        ("/v1/chat/completions", {"messages": [{"content": "x"}]}, 400, "messages[0]"),
        ("/v1/completions", {"prompt": 3}, 400, "prompt"),
        ("/v1/completions", {"prompt": "x", "max_tokens": 0}, 400, "max_tokens"),
        ("/v1/completions", {"prompt": "x", "temperature": 9}, 400, "temperature"),
        ("/v1/completions", {"prompt": "x", "n": 2}, 400, "n"),
        ("/v1/completions", {"prompt": "x", "model": "gpt-4o"}, 404, "model"),
    ],
)
def test_bad_input_is_refused_in_openais_error_shape(server, path, body, status, param):
    response, content = call(server, "POST", path, body)
    assert response.status == status
    error = json.loads(content)["error"]
    assert error["param"] == param and error["type"] == "invalid_request_error" and error["message"]


def test_a_body_that_is_not_json_and_unknown_paths_are_refused(server):
    response, content = call(server, "POST", "/v1/completions", raw=b"{not json")
    assert response.status == 400 and json.loads(content)["error"]["code"] == "invalid_json"
    assert call(server, "GET", "/v1/chat/completions")[0].status == 405
    assert call(server, "GET", "/v1/embeddings")[0].status == 404
