"""An imported image's chip family: the page shows what its libraries suggest and the owner confirms or corrects it
(page, API, CLI); a launch on another family's card goes ahead with a warning (wizard, page, API), where an official
image's wrong variant is still refused."""

import pytest
from django.conf import settings

from instances.models import Instance
from marketplace.models import ImageEvent

pytestmark = pytest.mark.django_db


@pytest.fixture
def en(owner_client):
    owner_client.cookies[settings.LANGUAGE_COOKIE_NAME] = "en"
    return owner_client


def test_the_page_shows_the_libraries_found_and_the_owner_confirms_another_family(en, owner, imported_image):
    image = imported_image(owner, "cuda")
    page = en.get(image.get_absolute_url()).content.decode()
    assert "NVIDIA GPU (CUDA)" in page and 'id="family-suggested"' in page and 'id="family-form"' in page

    response = en.post(f"/marketplace/images/{image.slug}/family/", {"family": "npu"})

    assert response.status_code == 302
    assert image.variants.get().family == "npu"
    page = en.get(image.get_absolute_url()).content.decode()
    assert 'id="family-confirmed"' in page and "Ascend NPU (CANN)" in page
    assert ImageEvent.objects.filter(image=image, reason__contains="Ascend").exists()


def test_the_owner_may_say_an_image_is_for_no_chip_family(en, owner, imported_image):
    image = imported_image(owner, "cuda")
    en.post(f"/marketplace/images/{image.slug}/family/", {"family": ""})
    assert image.variants.get().family == ""


def test_a_family_that_does_not_exist_is_refused_with_a_message(en, owner, imported_image):
    image = imported_image(owner, "cuda")
    response = en.post(f"/marketplace/images/{image.slug}/family/", {"family": "tpu"}, follow=True)
    assert "Select a valid choice" in response.content.decode()
    assert image.variants.get().family == "cuda"


def test_strangers_cannot_see_or_change_the_family(client, stranger, owner, imported_image):
    image = imported_image(owner, "cuda")
    client.force_login(stranger)
    assert client.post(f"/marketplace/images/{image.slug}/family/", {"family": "npu"}).status_code == 404
    assert image.variants.get().family == "cuda"


def test_the_api_confirms_the_family_and_says_so(owner_api, owner, imported_image):
    image = imported_image(owner, "cuda")
    response = owner_api.patch(f"/api/v1/images/{image.slug}", {"family": "mlu"}, format="json")
    body = response.json()
    assert response.status_code == 200, body
    assert body["variants"][0]["family"] == "mlu" and body["imported"]["family_confirmed"] is True


def test_the_api_confirms_the_suggested_family_when_none_is_given(owner_api, owner, imported_image):
    image = imported_image(owner, "npu")
    body = owner_api.patch(f"/api/v1/images/{image.slug}", {}, format="json").json()
    assert body["variants"][0]["family"] == "npu" and body["imported"]["family_confirmed"] is True


def test_the_api_refuses_a_bad_family_and_an_official_image(owner_api, owner, imported_image, official_images):
    image = imported_image(owner, "cuda")
    assert owner_api.patch(f"/api/v1/images/{image.slug}", {"family": "tpu"}, format="json").status_code == 400
    assert owner_api.patch("/api/v1/images/pytorch-2.2", {"family": "npu"}, format="json").status_code in (403, 404)
    assert image.variants.get().family == "cuda"


def test_a_strangers_api_call_is_a_404(stranger_api, owner, imported_image):
    image = imported_image(owner, "cuda")
    assert stranger_api.patch(f"/api/v1/images/{image.slug}", {"family": "npu"}, format="json").status_code == 404


def _options(html: str) -> str:
    select = html[html.index('id="id_image"') :]
    return select[: select.index("</select>")]


def test_the_wizard_offers_a_cuda_image_on_an_ascend_chip_with_a_warning(en, lifecycle, owner, imported_image):
    image = imported_image(owner, "cuda")
    variant = image.variants.get().slug
    html = en.get("/instances/new/", {"chip": "ascend-910b", "cards": "1", "plan": "payg"}).content.decode()
    assert variant in _options(html) and "(for NVIDIA GPU (CUDA))" in _options(html)
    assert 'id="image-family-warning"' not in html  # an official Ascend image is chosen first

    html = en.get("/instances/new/", {"chip": "ascend-910b", "cards": "1", "plan": "payg", "image": variant})
    assert 'id="image-family-warning"' in html.content.decode()
    assert "This image is built for NVIDIA GPU (CUDA)" in html.content.decode()


def test_no_warning_when_the_image_is_launched_on_its_own_family(en, lifecycle, owner, imported_image):
    variant = imported_image(owner, "cuda").variants.get().slug
    html = en.get("/instances/new/", {"chip": "a100-80g", "cards": "1", "plan": "payg", "image": variant})
    assert 'id="image-family-warning"' not in html.content.decode()


def test_launching_it_on_another_familys_card_warns_on_the_page(en, lifecycle, owner, imported_image):
    variant = imported_image(owner, "cuda").variants.get().slug
    form = {
        "chip": "ascend-910b",
        "cards": "1",
        "plan": "payg",
        "image": variant,
        "name": "cuda-on-ascend",
        "term_end_action": "continue",
    }
    response = en.post("/instances/new/", form, follow=True)
    assert Instance.objects.get().image == variant
    assert "This image is built for NVIDIA GPU (CUDA)" in response.content.decode()


def test_the_api_launches_it_with_a_warning(owner_api, lifecycle, owner, imported_image):
    variant = imported_image(owner, "cuda").variants.get().slug
    response = owner_api.post(
        "/api/v1/instances", {"name": "x", "chip": "ascend-910b", "image": variant}, format="json"
    )
    body = response.json()
    assert response.status_code == 201, body
    assert len(body["warnings"]) == 1 and "CUDA" in body["warnings"][0] and "CANN" in body["warnings"][0]


def test_a_cpu_image_on_a_card_is_warned_about_too(owner_api, lifecycle, owner, imported_image):
    variant = imported_image(owner, "").variants.get().slug
    response = owner_api.post("/api/v1/instances", {"name": "x", "chip": "dcu-z100", "image": variant}, format="json")
    assert response.status_code == 201 and "DTK" in response.json()["warnings"][0]


def test_a_launch_that_matches_has_no_warning(owner_api, lifecycle, owner, imported_image):
    variant = imported_image(owner, "cuda").variants.get().slug
    response = owner_api.post("/api/v1/instances", {"name": "x", "chip": "a100-80g", "image": variant}, format="json")
    assert response.status_code == 201 and response.json()["warnings"] == []


def test_a_strangers_imported_image_is_not_launchable(stranger_api, lifecycle, owner, imported_image):
    variant = imported_image(owner, "cuda").variants.get().slug
    response = stranger_api.post(
        "/api/v1/instances", {"name": "x", "chip": "a100-80g", "image": variant}, format="json"
    )
    assert response.status_code == 404 and not Instance.objects.exists()


def test_the_wizard_shows_the_images_own_command_as_the_default(en, lifecycle, owner, imported_image):
    variant = imported_image(owner, "cuda").variants.get().slug
    html = en.get("/instances/new/", {"chip": "a100-80g", "cards": "1", "plan": "payg", "image": variant})
    assert 'id="image-command"' in html.content.decode() and "<code>python3 train.py</code>" in html.content.decode()
    official = en.get("/instances/new/", {"chip": "a100-80g", "cards": "1", "plan": "payg"}).content.decode()
    assert 'id="image-command"' not in official
