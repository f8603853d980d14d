"""The /v1 proxy as production serves it: the console under uvicorn (``console_server``), a real model server, and
an HTTP client reading the stream as it comes."""

import json

import httpx

from inference import services as endpoints
from inference.models import EndpointRequest
from inference.tests.fixtures import point_at
from tests.fixtures.services import wait_until

CHAT = {"model": "Qwen2.5-0.5B-Instruct", "messages": [{"role": "user", "content": "Hello"}], "stream": True}


def test_a_streamed_answer_reaches_the_client_while_the_model_server_still_writes(
    console_server, owner, deploy, model_server
):
    endpoint = deploy(owner)
    point_at(endpoint, model_server.url)
    key = endpoints.create_key(endpoint)
    headers = {"Authorization": f"Bearer {key.plaintext}", "Content-Type": "application/json"}

    with httpx.Client(base_url=console_server.url, timeout=30) as client:
        with client.stream("POST", "/v1/chat/completions", content=json.dumps(CHAT), headers=headers) as response:
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("text/event-stream")
            chunks = response.iter_bytes()
            # The first token is here while the model server still holds back its last one.
            assert b"Hello" in next(chunks)
            assert not model_server.last_chunk_sent.is_set()
            model_server.last_chunk_gate.set()
            rest = b"".join(chunks)

    assert rest.rstrip().endswith(b"data: [DONE]")
    row = wait_until(lambda: EndpointRequest.objects.filter(endpoint=endpoint).first(), message="the request log")
    assert row.stream and row.status_code == 200 and row.completion_tokens == 5
