"""The CPU demo template on the local backend, as a user meets it: deployed, running once its model server answers,
then called through the console with an endpoint key and the real ``openai`` client, streaming and not."""

import time

import openai
import pytest

from billing.models import UsageSession
from inference import services as endpoints
from inference.models import EndpointRequest
from inference.tests.fixtures import fund
from instances import lifecycle
from instances.backends import local
from instances.choices import Status
from instances.models import Instance
from tests.fixtures.services import wait_until

pytestmark = [pytest.mark.sandbox, pytest.mark.django_db(transaction=True)]


def test_the_tiny_demo_endpoint_answers_the_openai_client_through_the_console(
    on_local, inference_catalog, console_server, owner
):
    fund(owner)
    deployed_at = time.monotonic()
    endpoint = endpoints.deploy(owner, endpoints.DeployRequest(template="tiny-demo-cpu"))

    def instance():
        return Instance.objects.with_related().get(pk=endpoint.instance_id)

    on_local.settle(until=lambda: instance().status == Status.RUNNING, message="the endpoint to run")
    seconds_to_running = time.monotonic() - deployed_at
    print(f"tiny-demo-cpu: deploy to running in {seconds_to_running:.1f} s")  # noqa: T201 - measured, reported
    assert seconds_to_running < 30  # SPEC §9: click to ready within 30 s on the embedded backend

    # Running only once the model server answered; billing began then, not before.
    running = instance()
    assert (local.sockets(running.public_id) / local.MODEL_SOCKET).exists()
    session = UsageSession.objects.get(resource_id=running.public_id)
    assert session.started_at == running.running_since

    key = endpoints.create_key(endpoint, name="openai")
    client = openai.OpenAI(base_url=f"{console_server.url}/v1", api_key=key.plaintext, max_retries=0, timeout=30)

    (model,) = client.models.list().data
    assert model.id == "ngram-zh-en-tiny" == endpoint.served_model

    messages = [{"role": "user", "content": "您的余额不足"}]
    answer = client.chat.completions.create(model=model.id, messages=messages, max_tokens=20, seed=1)
    text = answer.choices[0].message.content
    assert text and len(text) <= 20 and answer.usage.completion_tokens == len(text)
    assert any("\u4e00" <= c <= "\u9fff" for c in text)  # it continues the Chinese prompt in Chinese
    again = client.chat.completions.create(model=model.id, messages=messages, max_tokens=20, seed=1)
    assert again.choices[0].message.content == text

    pieces = client.chat.completions.create(model=model.id, messages=messages, max_tokens=12, seed=2, stream=True)
    streamed = "".join(c.choices[0].delta.content or "" for c in pieces if c.choices)
    assert 0 < len(streamed) <= 12

    completion = client.completions.create(model=model.id, prompt="The instance ", max_tokens=8, seed=3)
    assert completion.choices[0].text and completion.usage.prompt_tokens == len("The instance ")

    with pytest.raises(openai.BadRequestError) as refused:
        client.chat.completions.create(model=model.id, messages=[], max_tokens=5)
    assert refused.value.body["param"] == "messages"

    rows = wait_until(
        lambda: list(EndpointRequest.objects.filter(endpoint=endpoint).order_by("at", "id")) or None,
        message="the request log",
    )
    assert [r.status_code for r in rows][:4] == [200, 200, 200, 200]
    assert rows[0].completion_tokens == len(text) and rows[2].stream

    # Stopping it ends the model server with the machine, and the billing with it.
    lifecycle.stop(instance())
    on_local.settle(until=lambda: instance().status == Status.STOPPED, message="the endpoint to stop")
    assert UsageSession.objects.get(resource_id=running.public_id).ended_at is not None
    assert not (local.sockets(running.public_id) / local.MODEL_SOCKET).exists()


def test_an_endpoint_whose_model_server_exits_fails_at_once_with_its_reason_and_unbilled(
    on_local, inference_catalog, owner
):
    fund(owner)
    endpoint = endpoints.deploy(owner, endpoints.DeployRequest(template="tiny-demo-cpu"))
    # A model server that cannot start (in place of the tiny model's, before the machine boots).
    Instance.objects.filter(pk=endpoint.instance_id).update(start_command="echo no model here; exit 3")

    def instance():
        return Instance.objects.get(pk=endpoint.instance_id)

    on_local.settle(until=lambda: instance().status == Status.FAILED, timeout=30, message="the endpoint to fail")
    failed = instance()
    assert "exited with status 3" in failed.status_detail
    assert not UsageSession.objects.filter(resource_id=failed.public_id).exists()
