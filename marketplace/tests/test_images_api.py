"""/api/v1/images: list, filter, search and detail for everyone; clone, publish, rate and save for owners, with
read-only tokens refused and someone else's private image answering 404."""

import pytest
from rest_framework.test import APIClient

from instances import lifecycle as instance_lifecycle
from instances.models import Instance
from instances.tests.fixtures import settle
from marketplace.images import services
from marketplace.models import Image

pytestmark = pytest.mark.django_db


def test_list_search_and_detail_without_logging_in(anon_api, official_images):
    body = anon_api.get("/api/v1/images", {"q": "昇腾", "category": "xinchuang"}).json()
    assert body["results"][0]["slug"] == "mindspore-2.3"
    detail = anon_api.get("/api/v1/images/mindspore-2.3").json()
    offer = detail["offers"][0]
    assert offer["chip"] == "ascend-910b" and offer["per_card_hour"] == "1.710000"  # a string, never a float
    assert detail["variants"][0]["slug"] == "mindspore-2.3-cann8" and "chip=ascend-910b" in detail["launch_url"]
    by_id = anon_api.get(f"/api/v1/images/{detail['id']}").json()
    assert by_id["slug"] == "mindspore-2.3"


def test_bad_query_parameters_are_a_400_with_a_message_and_an_unknown_chip_a_404(anon_api, official_images):
    response = anon_api.get("/api/v1/images", {"backend": "tpu"})
    assert response.status_code == 400 and response.json()["code"] == "invalid" and "errors" in response.json()
    response = anon_api.get("/api/v1/images", {"chip": "nope"})
    assert response.status_code == 404 and response.json()["code"] == "unknown_chip"


def test_one_click_clone_launches_on_the_cheapest_compatible_chip(owner_api, lifecycle, official_images):
    response = owner_api.post("/api/v1/images/mindspore-2.3/clone", {}, format="json")
    assert response.status_code == 201, response.json()
    instance = Instance.objects.get()
    assert instance.chip.slug == "ascend-910b" and instance.image == "mindspore-2.3-cann8"
    assert response.json()["instance"]["id"] == str(instance.public_id)


def test_clone_to_my_images_then_publish(owner_api, stranger_api, official_images):
    response = owner_api.post(
        "/api/v1/images/vllm-0.6/clone", {"target": "my_images", "name": "My vLLM"}, format="json"
    )
    assert response.status_code == 201
    slug = response.json()["image"]["slug"]
    assert response.json()["image"]["review_state"] == "draft" and response.json()["image"]["mine"] is True
    assert stranger_api.get(f"/api/v1/images/{slug}").status_code == 404
    assert stranger_api.post(f"/api/v1/images/{slug}/publish").status_code == 404
    published = owner_api.post(f"/api/v1/images/{slug}/publish")
    assert published.status_code == 200 and published.json()["review_state"] == "pending"
    assert owner_api.post(f"/api/v1/images/{slug}/publish").status_code == 409
    assert slug in [r["slug"] for r in owner_api.get("/api/v1/images", {"mine": "true"}).json()["results"]]
    assert slug not in [r["slug"] for r in stranger_api.get("/api/v1/images").json()["results"]]


def test_a_read_only_token_cannot_clone_rate_or_save(teammate_api, official_images):
    assert teammate_api.get("/api/v1/images").status_code == 200
    for path, body in (
        ("/api/v1/images/vllm-0.6/clone", {"target": "my_images"}),
        ("/api/v1/images/vllm-0.6/ratings", {"stars": 5}),
        ("/api/v1/images", {"instance": "x", "name": "y"}),
    ):
        assert teammate_api.post(path, body, format="json").status_code == 403
    assert not Image.objects.filter(owner__isnull=False).exists()


def test_anonymous_writes_are_refused(anon_api, official_images):
    assert anon_api.post("/api/v1/images/vllm-0.6/clone", {}, format="json").status_code in (401, 403)


def test_save_an_instance_through_the_api(owner_api, launch, django_capture_on_commit_callbacks, eager_tasks):

    instance = launch(name="api-save")
    settle()
    running = owner_api.post("/api/v1/images", {"instance": str(instance.public_id), "name": "x"}, format="json")
    assert running.status_code == 409 and running.json()["code"] == "instance_not_stopped"
    instance_lifecycle.stop(Instance.objects.with_related().get(pk=instance.pk))
    settle()
    with django_capture_on_commit_callbacks(execute=True):
        response = owner_api.post(
            "/api/v1/images", {"instance": str(instance.public_id), "name": "Saved"}, format="json"
        )
    assert response.status_code == 201 and response.json()["status"] == "saving"
    assert owner_api.get(f"/api/v1/images/{response.json()['slug']}").json()["status"] == "ready"
    bad = owner_api.post("/api/v1/images", {"instance": str(instance.public_id), "name": ""}, format="json")
    assert bad.status_code == 400


def test_staff_review_through_the_api(owner, staff, community_image):

    image = services.publish(owner, community_image(listed=False))
    client = APIClient()
    client.force_authenticate(staff)
    refused = client.post(f"/api/v1/images/{image.slug}/review", {"approve": False}, format="json")
    assert refused.status_code == 400 and refused.json()["code"] == "reason_required"
    listed = client.post(f"/api/v1/images/{image.slug}/review", {"approve": True}, format="json")
    assert listed.status_code == 200 and listed.json()["review_state"] == "listed"
