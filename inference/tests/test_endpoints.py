"""Inference endpoints: deploy, keys, the OpenAI-compatible proxy against a real HTTP upstream, streaming,
errors in OpenAI's shape, rate limits, metering as an endpoint, scale to zero, and ownership."""

import json
from datetime import timedelta

import pytest
from asgiref.sync import async_to_sync
from django.db import OperationalError
from django.test import AsyncClient, Client
from django.utils import timezone

from accounts import services as console
from billing import wallet
from billing.models import UsageSession
from billing.quote import load_price_book
from inference import services as endpoints
from inference import template_catalog as inference
from inference.models import Endpoint, EndpointRequest, InferenceTemplate
from inference.tests.fixtures import point_at, streamed_chunks
from instances import lifecycle
from instances.models import Instance
from instances.tests.fixtures import settle
from storage.models import HubMount

pytestmark = pytest.mark.django_db

CHAT = {"model": "Qwen2.5-0.5B-Instruct", "messages": [{"role": "user", "content": "Hello"}]}


def call(key, path="chat/completions", body=None, **headers):
    headers.setdefault("HTTP_ACCEPT_LANGUAGE", "en")  # the messages below are checked in English
    client = Client()
    auth = {"HTTP_AUTHORIZATION": f"Bearer {key}"} if key else {}
    return client.post(f"/v1/{path}", json.dumps(body or CHAT), content_type="application/json", **auth, **headers)


def test_deploying_a_template_runs_an_endpoint_with_the_model_mounted_and_metered_as_an_endpoint(owner, deploy):
    endpoint = deploy(owner, name="my-qwen")

    instance = endpoint.instance
    assert instance.kind == Instance.Kind.ENDPOINT
    assert instance.status == "running"
    assert instance.image == "vllm-0.6-cuda12" and instance.chip.backend == "cuda"
    assert instance.name == "my-qwen"

    mount = HubMount.objects.get(instance=instance)
    assert mount.target == "/root/public/Qwen/Qwen2.5-0.5B-Instruct"
    session = UsageSession.objects.get(resource_id=instance.public_id)
    assert session.kind == "endpoint"


def test_deploy_picks_the_cheapest_compatible_chip_unless_one_is_asked_for(owner, deploy):

    template = InferenceTemplate.objects.get(slug="qwen2.5-7b-instruct-vllm")

    cheapest = inference.offers(template, load_price_book(user=owner), user=owner)[0].chip
    assert deploy(owner, template="qwen2.5-7b-instruct-vllm").instance.chip == cheapest
    assert deploy(owner, template="qwen2.5-7b-instruct-vllm", chip="a100-80g").instance.chip.slug == "a100-80g"


def test_deploying_on_an_incompatible_chip_or_an_unknown_template_is_refused_clearly(owner, deploy):
    deploy(owner)  # funds the owner
    with pytest.raises(Exception) as exc:
        endpoints.deploy(owner, endpoints.DeployRequest(template="chatglm3-6b-vllm-a800", chip="ascend-910b"))
    assert "a800-80g" in str(exc.value.message)
    with pytest.raises(Exception) as exc:
        endpoints.deploy(owner, endpoints.DeployRequest(template="nope"))
    assert exc.value.code == "unknown_template"


def test_a_key_calls_the_model_through_the_proxy_and_the_request_is_logged_with_tokens(owner, deploy, model_server):
    endpoint = deploy(owner)
    point_at(endpoint, model_server.url)
    key = endpoints.create_key(endpoint, name="app")

    response = call(key.plaintext)

    assert response.status_code == 200
    assert response.json()["choices"][0]["message"]["content"] == "Hello from a real upstream"
    assert model_server.requests[0]["path"] == "/v1/chat/completions"
    row = EndpointRequest.objects.get(endpoint=endpoint)
    assert (row.status_code, row.prompt_tokens, row.completion_tokens, row.key_id) == (200, 7, 5, key.key.pk)


def test_an_answer_reaches_the_client_when_its_log_line_cannot_be_written(
    owner, deploy, model_server, monkeypatch, caplog
):
    # The connection was handed back while the model answered; borrowing one again for the log line may fail
    endpoint = deploy(owner)
    point_at(endpoint, model_server.url)
    key = endpoints.create_key(endpoint, name="app")

    def no_connection(*args, **kwargs):
        raise OperationalError("couldn't get a connection after 10.00 sec")

    monkeypatch.setattr(endpoints, "log_request", no_connection)
    response = call(key.plaintext)

    assert response.status_code == 200
    assert response.json()["choices"][0]["message"]["content"] == "Hello from a real upstream"
    assert "was not written" in caplog.text and not EndpointRequest.objects.filter(endpoint=endpoint).exists()


def test_streaming_passes_through_chunk_by_chunk(owner, deploy, model_server):
    endpoint = deploy(owner)
    point_at(endpoint, model_server.url)
    key = endpoints.create_key(endpoint)

    # The async test client takes the ASGI path, where the answer streams while the client reads it; the database
    # calls inside come back to this thread, so they see this test's transaction.
    @async_to_sync
    async def stream_through_the_proxy():
        headers = {"Authorization": f"Bearer {key.plaintext}", "Accept-Language": "en"}
        body = json.dumps(CHAT | {"stream": True})
        response = await AsyncClient().post(
            "/v1/chat/completions", body, content_type="application/json", headers=headers
        )
        assert response.status_code == 200 and response.streaming
        stream = aiter(response.streaming_content)
        first = await anext(stream)
        # The client holds the first chunk while the upstream still holds back its last one.
        assert b"Hello" in first
        assert not model_server.last_chunk_sent.is_set()
        model_server.last_chunk_gate.set()
        return b"".join([chunk async for chunk in stream])

    rest = stream_through_the_proxy()
    assert b"upstream" in rest and rest.rstrip().endswith(b"data: [DONE]")
    row = EndpointRequest.objects.get(endpoint=endpoint)
    assert row.stream and row.status_code == 200 and row.completion_tokens == 5


@pytest.mark.parametrize("header", ["", "Bearer sk-wrong.secret", "Bearer nonsense", "Basic abc"])
def test_a_missing_or_wrong_key_is_401_in_openai_error_shape(owner, deploy, header):
    deploy(owner)
    client = Client()
    extra = {"HTTP_AUTHORIZATION": header} if header else {}
    response = client.post("/v1/chat/completions", json.dumps(CHAT), content_type="application/json", **extra)
    assert response.status_code == 401
    error = response.json()["error"]
    assert error["code"] == "invalid_api_key" and error["type"] == "invalid_request_error" and error["message"]


def test_a_revoked_key_is_401(owner, deploy, model_server):
    endpoint = deploy(owner)
    point_at(endpoint, model_server.url)
    key = endpoints.create_key(endpoint)
    assert call(key.plaintext).status_code == 200

    endpoints.revoke_key(endpoint, key.key.public_id)

    response = call(key.plaintext)
    assert response.status_code == 401 and response.json()["error"]["code"] == "invalid_api_key"


def test_the_401_message_follows_accept_language(owner, deploy):
    deploy(owner)
    english = call("sk-wrong", HTTP_ACCEPT_LANGUAGE="en").json()["error"]["message"]
    assert english == "Invalid or revoked API key for this endpoint."


def test_another_users_key_and_a_console_token_never_reach_this_endpoint(owner, stranger, deploy, model_server):
    mine = deploy(owner)
    theirs = deploy(stranger)
    point_at(mine, model_server.url)
    point_at(theirs, model_server.url)
    their_key = endpoints.create_key(theirs)

    console_token = console.create_api_token(owner, name="console", scope="read_write").plaintext

    assert call(console_token).status_code == 401
    assert call(their_key.plaintext).status_code == 200
    # The stranger's key reached the stranger's endpoint, never the owner's.
    assert not EndpointRequest.objects.filter(endpoint=mine).exists()
    assert EndpointRequest.objects.filter(endpoint=theirs).count() == 1


def test_upstream_down_is_502_with_a_clear_message_and_nothing_is_charged(owner, deploy):
    endpoint = deploy(owner)
    point_at(endpoint, "http://127.0.0.1:9/v1")  # the discard port: nothing listens
    key = endpoints.create_key(endpoint)
    balance = wallet.compute_balance(owner)

    response = call(key.plaintext)

    assert response.status_code == 502
    error = response.json()["error"]
    assert error["code"] == "upstream_unavailable" and "nothing was charged" in error["message"]
    row = EndpointRequest.objects.get(endpoint=endpoint)
    assert (row.status_code, row.prompt_tokens, row.completion_tokens) == (502, 0, 0)
    assert wallet.compute_balance(owner) == balance


def test_a_key_over_its_rate_limit_gets_429(owner, deploy, model_server, settings):
    settings.INFERENCE_RATE_LIMIT_PER_MINUTE = 2
    endpoint = deploy(owner)
    point_at(endpoint, model_server.url)
    key = endpoints.create_key(endpoint)

    statuses = [call(key.plaintext).status_code for _ in range(3)]

    assert statuses == [200, 200, 429]
    assert call(key.plaintext).json()["error"]["code"] == "rate_limit_exceeded"


def test_models_lists_the_served_model(owner, deploy):
    endpoint = deploy(owner)
    key = endpoints.create_key(endpoint)
    response = Client().get("/v1/models", HTTP_AUTHORIZATION=f"Bearer {key.plaintext}")
    assert response.json()["data"][0]["id"] == "Qwen2.5-0.5B-Instruct"


def test_a_request_to_a_stopped_endpoint_answers_503_saying_it_starts_and_starts_it(owner, deploy):
    endpoint = deploy(owner)
    key = endpoints.create_key(endpoint)

    lifecycle.stop(endpoint.instance)
    settle()
    assert Instance.objects.get(pk=endpoint.instance_id).status == "stopped"

    response = call(key.plaintext)

    assert response.status_code == 503
    assert response.json()["error"]["code"] == "endpoint_starting"
    assert "starting" in response.json()["error"]["message"]
    settle()
    assert Instance.objects.get(pk=endpoint.instance_id).status == "running"


def test_an_idle_endpoint_scales_to_zero_and_billing_stops(owner, deploy):
    endpoint = deploy(owner, idle_stop_minutes=5)
    busy = deploy(owner, idle_stop_minutes=5)
    long_ago = timezone.now() - timedelta(minutes=6)
    Instance.objects.filter(pk__in=[endpoint.instance_id, busy.instance_id]).update(running_since=long_ago)
    Endpoint.objects.filter(pk=busy.pk).update(last_request_at=timezone.now())

    assert endpoints.scale_to_zero() == 1

    assert Instance.objects.get(pk=endpoint.instance_id).status == "stopping"
    assert Instance.objects.get(pk=busy.instance_id).status == "running"
    assert UsageSession.objects.get(resource_id=endpoint.instance.public_id).ended_at is not None


def test_the_simulated_model_answers_in_openai_shape_and_says_it_is_simulated(owner, deploy):
    endpoint = deploy(owner)
    key = endpoints.create_key(endpoint)

    body = call(key.plaintext).json()
    assert "simulated model" in body["choices"][0]["message"]["content"]
    assert body["usage"]["completion_tokens"] > 0
    stream = call(key.plaintext, body=CHAT | {"stream": True})
    chunks = streamed_chunks(stream)
    assert len(chunks) > 5 and chunks[-1] == b"data: [DONE]\n\n"
    logged = list(EndpointRequest.objects.filter(endpoint=endpoint).order_by("id"))
    assert [(r.status_code, r.stream) for r in logged] == [(200, False), (200, True)]
    assert all(r.completion_tokens > 0 for r in logged)


def test_the_proxy_never_forwards_to_the_address_a_request_names(owner, deploy, model_server):
    # A Host header naming another port of the console's host (Django's host check ignores the port) must not
    # turn the proxy into a way to reach that port: the simulated model is answered inside the console.
    endpoint = deploy(owner)
    key = endpoints.create_key(endpoint)
    port = model_server.httpd.server_address[1]

    response = call(key.plaintext, HTTP_HOST=f"127.0.0.1:{port}")

    assert response.status_code == 200
    assert "simulated model" in response.json()["choices"][0]["message"]["content"]
    assert model_server.requests == []


def test_the_simulated_model_has_no_address_of_its_own(owner, deploy):
    endpoint = deploy(owner)
    url = f"/_simulated/inference/{endpoint.instance.public_id}/v1/chat/completions"
    assert Client().post(url, json.dumps(CHAT), content_type="application/json").status_code == 404


def test_a_real_backend_that_reported_no_model_server_answers_502_without_a_request(owner, deploy):
    endpoint = deploy(owner)
    Instance.objects.filter(pk=endpoint.instance_id).update(backend_name="slurm", access={})
    key = endpoints.create_key(endpoint)

    response = call(key.plaintext)

    assert response.status_code == 502
    assert response.json()["error"]["code"] == "upstream_unavailable"


def test_a_deeply_nested_body_answers_400_in_openais_shape(owner, deploy):
    endpoint = deploy(owner)
    key = endpoints.create_key(endpoint)
    body = b"[" * 5000 + b"]" * 5000

    response = Client().post(
        "/v1/chat/completions",
        body,
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {key.plaintext}",
        HTTP_ACCEPT_LANGUAGE="en",
    )

    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_json"
    assert "nested too deeply" in response.json()["error"]["message"]


def test_token_counts_a_model_server_makes_up_are_logged_as_zero(owner, deploy):
    endpoint = deploy(owner)
    key = endpoints.create_key(endpoint)
    for usage in ({"prompt_tokens": "many", "completion_tokens": -5}, ["not", "a", "dict"], {"prompt_tokens": 2**40}):
        row = endpoints.log_request(
            endpoint, key.key, path="chat/completions", status_code=200, latency_ms=1, usage=usage
        )
        assert (row.prompt_tokens, row.completion_tokens) == (0, 0)
