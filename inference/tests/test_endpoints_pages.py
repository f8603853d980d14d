"""Endpoint and template pages and the REST API: deploy, the key shown once in the examples, ownership (404),
bad input (400 JSON), and list pages whose query count does not grow with rows."""

import pytest
from django.test import Client

from inference import services as endpoints
from inference.models import Endpoint
from inference.tests.fixtures import fund
from instances.models import Instance

pytestmark = pytest.mark.django_db


def test_the_hub_model_page_offers_deploy_as_api(client, inference_catalog):
    page = client.get("/marketplace/hub/Qwen/Qwen2.5-7B-Instruct").content.decode()
    assert 'href="/endpoints/deploy/qwen2.5-7b-instruct-vllm/"' in page
    assert 'href="/endpoints/deploy/qwen2.5-7b-instruct-mindformers/"' in page


def test_template_pages_list_frameworks_chips_and_prices(client, inference_catalog):
    listing = client.get("/marketplace/inference/")
    assert listing.status_code == 200 and "chatglm3-6b-mindformers" in listing.content.decode()
    detail = client.get("/marketplace/inference/chatglm3-6b-vllm-a800/").content.decode()
    assert "MindFormers" not in detail and "vLLM" in detail and "/root/public/THUDM/chatglm3-6b" in detail
    assert client.get("/marketplace/inference/nope/").status_code == 404


def test_deploying_from_the_page_shows_the_endpoint_and_its_first_key_in_the_curl_example(
    owner_client, owner, inference_catalog, instant, eager_tasks
):
    fund(owner)
    response = owner_client.post("/endpoints/deploy/qwen2.5-0.5b-instruct-vllm/", {"chip": "", "name": "qwen-api"})
    endpoint = Endpoint.objects.get(instance__owner=owner)
    assert response.status_code == 302 and response.url == endpoint.get_absolute_url()

    created = owner_client.post(f"/endpoints/{endpoint.public_id}/keys/", {"name": "app"})
    assert created.status_code == 302
    page = owner_client.get(created.url).content.decode()
    key = endpoint.keys.get()
    assert f"Bearer {key.prefix}." in page  # the plaintext, shown once in the curl example
    assert "http://testserver/v1/chat/completions" in page
    again = owner_client.get(endpoint.get_absolute_url()).content.decode()
    assert f"Bearer {key.prefix}." not in again and "sk-YOUR-KEY" in again


def test_deploy_with_bad_input_shows_a_clear_message(owner_client, owner, inference_catalog):
    owner_client.cookies["django_language"] = "en"
    fund(owner)
    response = owner_client.post("/endpoints/deploy/qwen2.5-0.5b-instruct-vllm/", {"idle_stop_minutes": "two"})
    assert response.status_code == 400 and "whole number" in response.content.decode()
    response = owner_client.post("/endpoints/deploy/qwen2.5-0.5b-instruct-vllm/", {"chip": "ascend-910b"})
    assert response.status_code == 400 and not Endpoint.objects.exists()


def test_a_stranger_gets_404_on_the_endpoint_page_actions_and_api(owner, stranger, deploy, stranger_api):
    endpoint = deploy(owner)
    client = Client()
    client.force_login(stranger)
    for url in ["", "chart/"]:
        assert client.get(f"/endpoints/{endpoint.public_id}/{url}").status_code == 404
    for url in ["keys/", "stop/", "release/"]:
        assert client.post(f"/endpoints/{endpoint.public_id}/{url}").status_code == 404
    assert stranger_api.get(f"/api/v1/endpoints/{endpoint.public_id}").status_code == 404
    assert stranger_api.post(f"/api/v1/endpoints/{endpoint.public_id}/keys", {}).status_code == 404
    assert stranger_api.delete(f"/api/v1/endpoints/{endpoint.public_id}").status_code == 404
    assert stranger_api.get("/api/v1/endpoints").json() == []
    assert Instance.objects.get(pk=endpoint.instance_id).status == "running"


def test_the_api_deploys_returns_the_key_once_and_manages_keys(owner, owner_api, inference_catalog, instant):
    fund(owner)
    response = owner_api.post("/api/v1/endpoints", {"template": "qwen2.5-0.5b-instruct-vllm"}, format="json")
    assert response.status_code == 201
    body = response.json()
    assert body["key"].startswith("sk-") and body["base_url"] == "http://testserver/v1"
    assert body["model"] == "Qwen2.5-0.5B-Instruct"

    detail = owner_api.get(f"/api/v1/endpoints/{body['id']}").json()
    assert "key" not in detail and detail["keys"][0]["prefix"] == body["key"].split(".")[0]
    created = owner_api.post(f"/api/v1/endpoints/{body['id']}/keys", {"name": "ci"}, format="json").json()
    revoked = owner_api.delete(f"/api/v1/endpoints/{body['id']}/keys/{created['id']}").json()
    assert revoked["revoked_at"] is not None
    assert endpoints.authenticate_key(created["key"]) is None


@pytest.mark.parametrize(
    "payload, code",
    [
        ({}, "invalid"),
        ({"template": "nope"}, "unknown_template"),
        ({"template": "qwen2.5-0.5b-instruct-vllm", "chip": "ascend-910b"}, "incompatible_chip"),
        ({"template": "qwen2.5-0.5b-instruct-vllm", "idle_stop_minutes": 1}, "invalid_idle_minutes"),
        ({"template": "qwen2.5-0.5b-instruct-vllm", "idle_stop_minutes": "x"}, "invalid"),
    ],
)
def test_api_deploy_with_bad_input_is_400_json_and_writes_nothing(owner, owner_api, inference_catalog, payload, code):
    fund(owner)
    response = owner_api.post("/api/v1/endpoints", payload, format="json")
    assert response.status_code == (404 if code == "unknown_template" else 400)  # a template that is not there
    assert response.json()["code"] == code and response.json()["message"]
    assert not Instance.objects.exists()


def test_a_read_only_token_cannot_deploy(teammate, teammate_api, inference_catalog):
    response = teammate_api.post("/api/v1/endpoints", {"template": "qwen2.5-0.5b-instruct-vllm"}, format="json")
    assert response.status_code == 403


def test_the_endpoint_list_query_count_does_not_grow_with_rows(
    owner, owner_client, deploy, django_assert_max_num_queries
):
    deploy(owner)
    with django_assert_max_num_queries(12) as few:
        assert owner_client.get("/endpoints/").status_code == 200
    shown = [deploy(owner) for _ in range(4)]
    with django_assert_max_num_queries(len(few.captured_queries)):
        page = owner_client.get("/endpoints/")
    html = page.content.decode()
    assert html.count('href="/endpoints/') >= 5
    for endpoint in shown:  # each row names its machine, model, status, chip and price
        instance = endpoint.instance
        row = html[html.index(f'href="{endpoint.get_absolute_url()}"') :].split("</tr>")[0]
        assert instance.name in row and endpoint.template.model.repo in row
        assert instance.get_status_display() in row and f"{instance.chip.label} × {instance.cards}" in row
        assert "¥" in row


def test_the_endpoint_page_shows_requests_in_its_log_and_chart(owner, owner_client, deploy):
    owner_client.cookies["django_language"] = "en"
    endpoint = deploy(owner)
    endpoints.log_request(
        endpoint,
        None,
        path="chat/completions",
        status_code=200,
        latency_ms=42,
        usage={"prompt_tokens": 3, "completion_tokens": 9},
    )
    page = owner_client.get(endpoint.get_absolute_url()).content.decode()
    assert "/v1/chat/completions" in page and "42 ms" in page and "simulated model" in page
    chart = owner_client.get(f"/endpoints/{endpoint.public_id}/chart/").json()
    assert chart["requests"] == [1] and chart["latency_ms"] == [42] and chart["tokens"] == [9]
