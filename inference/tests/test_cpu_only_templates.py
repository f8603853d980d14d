"""Where the machines have no card (the local backend), a template whose model needs one is refused before it is
deployed, on its page, on the deploy page and in the API; the CPU demo template deploys in the no-card mode. An
endpoint is billed only once its model server is healthy, and one that never is fails in bounded time, unbilled."""

from datetime import timedelta

import pytest
import time_machine
from django.utils import timezone

from billing.metering import meter
from billing.models import UsageSession
from catalog.models import Node
from core.errors import ServiceError
from inference import services as endpoints
from inference.tests.fixtures import fund
from instances import costs, lifecycle
from instances.choices import Reason, Status
from instances.models import Instance

pytestmark = pytest.mark.django_db

CARD_TEMPLATE = "qwen2.5-0.5b-instruct-vllm"


@pytest.fixture
def cpu_only_host(inference_catalog):
    """Every node on the local backend, whose machines run on the host's CPU (nothing is started here)."""
    Node.objects.update(backend_name="local")


def test_a_template_that_needs_a_card_is_refused_before_deploy_where_machines_have_none(owner, cpu_only_host):
    fund(owner)
    with pytest.raises(ServiceError) as refused:
        endpoints.deploy(owner, endpoints.DeployRequest(template=CARD_TEMPLATE))
    assert refused.value.code == "needs_a_card"
    assert "vLLM" in refused.value.message and "tiny-demo-cpu" in refused.value.message
    assert not Instance.objects.exists()


def test_the_api_refuses_it_with_the_code_and_lists_why(owner_api, owner, cpu_only_host):
    fund(owner)
    response = owner_api.post("/api/v1/endpoints", {"template": CARD_TEMPLATE}, format="json")
    assert response.status_code == 400 and response.json()["code"] == "needs_a_card"
    listed = {t["slug"]: t for t in owner_api.get("/api/v1/inference-templates").json()}
    assert listed[CARD_TEMPLATE]["needs_a_card"] and "tiny-demo-cpu" in listed[CARD_TEMPLATE]["refusal"]
    assert not listed["tiny-demo-cpu"]["needs_a_card"] and listed["tiny-demo-cpu"]["refusal"] == ""


def test_the_pages_say_why_in_chinese_and_offer_no_deploy_button(owner_client, cpu_only_host):
    owner_client.cookies["django_language"] = "zh-hans"
    page = owner_client.get(f"/marketplace/inference/{CARD_TEMPLATE}/").content.decode()
    assert 'id="needs-a-card"' in page and "仅有 CPU" in page and 'id="deploy-cta"' not in page
    deploy_page = owner_client.get(f"/endpoints/deploy/{CARD_TEMPLATE}/").content.decode()
    assert 'id="deploy-error"' in deploy_page and "disabled" in deploy_page


def test_the_cpu_demo_template_says_what_it_is_and_deploys_without_a_card(owner, owner_client, cpu_only_host):
    page = owner_client.get("/marketplace/inference/tiny-demo-cpu/").content.decode()
    assert 'id="template-about"' in page and "安装控制台时在本机训练" in page and 'id="deploy-cta"' in page
    fund(owner)
    endpoint = endpoints.deploy(owner, endpoints.DeployRequest(template="tiny-demo-cpu"))
    instance = endpoint.instance
    assert instance.chip is None and instance.cards == 0 and instance.backend_name == "local"
    assert endpoint.served_model == "ngram-zh-en-tiny"


def test_a_card_template_still_deploys_where_the_machines_have_cards(owner, deploy):
    assert deploy(owner, template=CARD_TEMPLATE).instance.status == Status.RUNNING


# Billing waits for health ---------------------------------------------------------------------------------


@pytest.fixture
def slow_machines(settings, inference_catalog, real_ledger):
    """Machines (simulated) that take an hour to come up, and endpoints given two minutes to become healthy."""
    settings.INSTANCES_SIM_PULL_SECONDS = 3600
    settings.ENDPOINT_HEALTH_TIMEOUT_SECONDS = 120


def test_an_endpoint_is_not_billed_while_it_starts_and_fails_unbilled_when_never_healthy(owner, slow_machines):
    fund(owner)
    with time_machine.travel(timezone.now(), tick=False) as clock:
        endpoint = endpoints.deploy(owner, endpoints.DeployRequest(template="tiny-demo-cpu"))
        for _minute in range(3):  # the metering beat runs while the endpoint starts
            lifecycle.reconcile()
            meter()
            clock.shift(timedelta(seconds=50))
        lifecycle.reconcile()
        meter()

    instance = Instance.objects.get(pk=endpoint.instance_id)
    assert instance.status == Status.FAILED and instance.status_reason == Reason.NEVER_HEALTHY
    assert "120 seconds" in instance.status_detail
    assert not UsageSession.objects.filter(resource_id=instance.public_id).exists()
    assert costs.cost_so_far(instance) == 0
