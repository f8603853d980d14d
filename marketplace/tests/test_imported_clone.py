"""One-click clone of an imported image: it launches on a chip of its family (the no-card mode for a CPU image), for
its owner and nobody else."""

import pytest

from instances.models import Instance

pytestmark = pytest.mark.django_db


def test_one_click_clone_launches_an_imported_cuda_image_on_a_cuda_card(owner_api, lifecycle, owner, imported_image):
    image = imported_image(owner, "cuda")
    response = owner_api.post(f"/api/v1/images/{image.slug}/clone", {"target": "instance"}, format="json")
    body = response.json()
    assert response.status_code == 201, body
    instance = Instance.objects.get()
    assert instance.image == image.variants.get().slug and instance.chip.backend == "cuda"
    assert body["instance"]["warnings"] == []


def test_one_click_clone_of_an_imported_cpu_image_uses_the_no_card_mode(owner_api, lifecycle, owner, imported_image):
    image = imported_image(owner, "")
    response = owner_api.post(f"/api/v1/images/{image.slug}/clone", {"target": "instance"}, format="json")
    assert response.status_code == 201, response.json()
    assert Instance.objects.get().chip is None


def test_the_image_page_offers_one_click_clone_of_an_imported_image(owner_client, lifecycle, owner, imported_image):
    image = imported_image(owner, "cuda")
    page = owner_client.get(image.get_absolute_url()).content.decode()
    assert 'id="clone-button"' in page and f"image={image.variants.get().slug}" in page


def test_a_stranger_cannot_clone_someone_elses_imported_image(stranger_api, lifecycle, owner, imported_image):
    image = imported_image(owner, "cuda")
    response = stranger_api.post(f"/api/v1/images/{image.slug}/clone", {"target": "instance"}, format="json")
    assert response.status_code == 404 and not Instance.objects.exists()
