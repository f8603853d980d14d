"""Endpoints are instances of kind "endpoint" but are not shown as machines: the instance list and API list leave
them out (they have /endpoints/ and /api/v1/endpoints), and an endpoint's instance page leads to its endpoint page."""

import pytest

from instances import launching
from instances.tests.fixtures import _default_image

pytestmark = pytest.mark.django_db


@pytest.fixture
def machine_and_endpoint(owner, deploy):
    endpoint = deploy(owner)
    fields = {"chip": "ascend-910b"}
    machine = launching.launch(owner, launching.LaunchRequest(name="train-1", image=_default_image(fields), **fields))
    return machine, endpoint


def test_the_instance_list_page_and_api_leave_endpoints_out(owner_client, owner_api, machine_and_endpoint):
    machine, endpoint = machine_and_endpoint
    page = owner_client.get("/instances/").content.decode()
    assert str(machine.public_id) in page and str(endpoint.instance.public_id) not in page
    for query in ("", "?all=1"):
        listed = [row["id"] for row in owner_api.get(f"/api/v1/instances/{query}").json()["results"]]
        assert listed == [str(machine.public_id)]
    # The endpoint's own API lists it
    assert owner_api.get("/api/v1/endpoints").status_code == 200


def test_an_endpoints_instance_page_leads_to_the_endpoint_page(owner_client, machine_and_endpoint):
    machine, endpoint = machine_and_endpoint
    response = owner_client.get(f"/instances/{endpoint.instance.public_id}/")
    assert response.status_code == 302 and response.url == endpoint.get_absolute_url()
    page = owner_client.get(response.url).content.decode()
    assert "curl-example" in page and "training-chart" not in page
    assert owner_client.get(machine.get_absolute_url()).status_code == 200
