"""/api/v1/instances: launch with a chip or a backend family, list, detail, actions; errors as JSON."""

import pytest

from catalog.models import Node
from instances.backends import simulated
from instances.models import Instance
from instances.tests.fixtures import settle

pytestmark = pytest.mark.django_db

URL = "/api/v1/instances"


def create(api, **body):
    body.setdefault("name", "api-1")
    body.setdefault("image", "pytorch-2.2-neuware")
    return api.post(URL, body, format="json")


def test_launch_with_a_backend_family_picks_a_chip_and_reaches_running(owner_api, lifecycle):
    response = create(owner_api, backend="mlu", cards=2)
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["chip"] == "mlu370-x8" and body["backend"] == "mlu" and body["cards"] == 2
    assert body["status"] == "creating"

    settle()
    detail = owner_api.get(f"{URL}/{body['id']}").json()
    assert detail["status"] == "running"
    assert detail["access"]["simulated"] is True
    assert isinstance(detail["price_per_hour"], str) and isinstance(detail["cost_so_far"], str)
    assert [e["new"] for e in detail["events"]] == ["creating", "starting", "running"]


def test_list_shows_only_the_callers_instances(owner_api, stranger_api, lifecycle, launch, stranger):
    launch(name="mine")
    launch(user=stranger, name="theirs")
    names = [i["name"] for i in owner_api.get(URL).json()["results"]]
    assert names == ["mine"]


def test_stop_start_release_through_the_api(owner_api, lifecycle):
    instance_id = create(owner_api, chip="mlu370-x8").json()["id"]
    settle()
    assert owner_api.post(f"{URL}/{instance_id}/stop").status_code == 202
    settle()
    assert owner_api.get(f"{URL}/{instance_id}").json()["status"] == "stopped"
    assert owner_api.post(f"{URL}/{instance_id}/start", {}, format="json").status_code == 202
    settle()
    assert owner_api.get(f"{URL}/{instance_id}").json()["status"] == "running"
    assert owner_api.post(f"{URL}/{instance_id}/release").status_code == 202
    settle()
    assert owner_api.get(f"{URL}/{instance_id}").json()["status"] == "released"
    assert owner_api.get(URL).json()["results"] == []
    assert len(owner_api.get(URL, {"all": "1"}).json()["results"]) == 1


def test_an_illegal_transition_answers_409_with_a_message(owner_api, lifecycle):
    instance_id = create(owner_api, chip="mlu370-x8").json()["id"]
    settle()
    response = owner_api.post(f"{URL}/{instance_id}/start", {}, format="json")
    assert response.status_code == 409
    assert response.json()["code"] == "invalid_transition" and "api-1" in response.json()["message"]


@pytest.mark.parametrize("verb", ["get", "start", "stop", "release"])
def test_a_stranger_gets_404_for_someone_elses_instance(owner_api, stranger_api, lifecycle, verb):
    instance_id = create(owner_api, chip="mlu370-x8").json()["id"]
    settle()
    if verb == "get":
        response = stranger_api.get(f"{URL}/{instance_id}")
    else:
        response = stranger_api.post(f"{URL}/{instance_id}/{verb}", {}, format="json")
    assert response.status_code == 404 and response.json()["code"] == "not_found"
    assert Instance.objects.get().status == "running"


def test_a_missing_or_malformed_id_is_the_same_404(owner_api, lifecycle):
    assert owner_api.get(f"{URL}/00000000-0000-0000-0000-000000000000").status_code == 404
    assert owner_api.get(f"{URL}/not-a-uuid").status_code == 404
    assert owner_api.post(f"{URL}/not-a-uuid/stop").status_code == 404


def test_a_read_only_token_can_list_but_not_launch(teammate_api, lifecycle):
    assert teammate_api.get(URL).status_code == 200
    assert create(teammate_api, chip="mlu370-x8").status_code == 403


def test_anonymous_callers_are_refused(anon_api, lifecycle):
    assert anon_api.get(URL).status_code in (401, 403)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"backend": "tpu"}, "backend"),
        ({"cards": "two"}, "cards"),
        ({"name": ""}, "name"),
        ({"auto_shutdown_at": "yesterday"}, "auto_shutdown_at"),
        ({"idle_shutdown_minutes": 1}, "idle_shutdown_minutes"),
    ],
)
def test_malformed_launches_answer_400_naming_the_field(owner_api, lifecycle, body, field):
    response = create(owner_api, **({"chip": "mlu370-x8"} | body))
    assert response.status_code == 400
    data = response.json()
    assert data["code"] == "invalid" and field in data["errors"] and data["message"]
    assert not Instance.objects.exists()


def test_an_incompatible_image_answers_400(owner_api, lifecycle):
    response = create(owner_api, chip="mlu370-x8", image="pytorch-2.2-cuda12")
    assert response.status_code == 400 and response.json()["code"] == "incompatible_image"


def test_insufficient_balance_answers_402(owner_api, lifecycle, owner):
    lifecycle.balances[owner.pk] = 0
    response = create(owner_api, chip="mlu370-x8")
    assert response.status_code == 402 and "¥" in response.json()["message"]


def test_out_of_capacity_answers_503_naming_where_cards_are_free(owner_api, lifecycle):
    Node.objects.filter(chip__slug="mlu370-x8").update(cards_reserved=8)
    response = create(owner_api, chip="mlu370-x8")
    assert response.status_code == 503
    body = response.json()
    assert body["code"] == "no_capacity" and body["alternatives"]
    assert {"zone", "chip", "free_cards", "max_cards"} <= set(body["alternatives"][0])
    assert "Free now" in body["message"] or "空闲" in body["message"]


def test_restart_on_a_full_node_moves_to_another_node_of_the_zone(owner_api, lifecycle):
    instance_id = create(owner_api, chip="mlu370-x8", cards=8).json()["id"]
    settle()
    owner_api.post(f"{URL}/{instance_id}/stop")
    settle()
    instance = Instance.objects.get(public_id=instance_id)
    Node.objects.filter(pk=instance.node_id).update(cards_reserved=8)  # someone else took the home node

    assert owner_api.post(f"{URL}/{instance_id}/start", {}, format="json").status_code == 202
    settle()
    moved = Instance.objects.get(public_id=instance_id)
    assert moved.node_id != instance.node_id and moved.status == "running"
    assert moved.events.filter(reason="moved").exists()


def test_restart_in_a_full_zone_offers_no_card_mode_and_starts_cpu_only(owner_api, lifecycle):
    instance_id = create(owner_api, chip="mlu370-x8", cards=8).json()["id"]
    settle()
    owner_api.post(f"{URL}/{instance_id}/stop")
    settle()
    Node.objects.filter(chip__slug="mlu370-x8").update(cards_reserved=8)

    refused = owner_api.post(f"{URL}/{instance_id}/start", {}, format="json")
    assert refused.status_code == 503 and refused.json()["no_card_offered"] is True

    assert owner_api.post(f"{URL}/{instance_id}/start", {"no_card": True}, format="json").status_code == 202
    settle()
    body = owner_api.get(f"{URL}/{instance_id}").json()
    assert body["status"] == "running" and body["chip"] is None and body["cards"] == 0


def test_a_failed_launch_can_be_released(owner_api, lifecycle):
    simulated.fail_next_submit()
    instance_id = create(owner_api, chip="mlu370-x8").json()["id"]
    settle()
    assert owner_api.get(f"{URL}/{instance_id}").json()["status"] == "failed"
    assert owner_api.post(f"{URL}/{instance_id}/release").status_code == 202
    settle()
    assert Instance.objects.get().status == "released"


def test_the_schema_documents_the_instance_endpoints(client):
    schema = client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    paths = schema["paths"]
    assert "/api/v1/instances/" in paths and "/api/v1/instances/{id}/stop/" in paths
    assert {"201", "402", "503"} <= set(paths["/api/v1/instances/"]["post"]["responses"])


def test_a_refused_launch_reserves_no_cards(owner_api, lifecycle):
    assert create(owner_api, chip="mlu370-x8", cards=3).status_code == 400
    assert not Instance.objects.exists() and sum(Node.objects.values_list("cards_reserved", flat=True)) == 0
