"""Only variants compatible with the chosen chip are offered, and an incompatible choice is a clear 400 — in the
wizard's form, in the API and in the service."""

import pytest
from django.conf import settings

from core.errors import ServiceError
from instances import launching
from instances.models import Instance

pytestmark = pytest.mark.django_db


@pytest.fixture
def en(owner_client):
    owner_client.cookies[settings.LANGUAGE_COOKIE_NAME] = "en"
    return owner_client


def _options(html: str) -> list[str]:
    select = html[html.index('id="id_image"') :]
    select = select[: select.index("</select>")]
    return [part.split('"')[0] for part in select.split('<option value="')[1:]]


def test_the_wizard_offers_only_the_chips_variants(en, lifecycle):
    html = en.get("/instances/new/", {"chip": "mlu370-x8", "cards": "1", "plan": "payg"}, HTTP_HX_REQUEST="true")
    options = _options(html.content.decode())
    assert set(options) == {"pytorch-2.2-neuware", "magicmind-1.10", "case-bank-antifraud-mlu370"}


def test_the_wizard_offers_the_users_own_images_but_not_others(en, lifecycle, owner, stranger, community_image):
    mine = community_image(listed=False, base="mindspore-2.3", name="My MindSpore")
    theirs = community_image(user=stranger, listed=False, base="mindspore-2.3", name="Their MindSpore")
    options = _options(en.get("/instances/new/", {"chip": "ascend-910b"}).content.decode())
    assert f"{mine.slug}-npu" in options and f"{theirs.slug}-npu" not in options


def test_the_form_refuses_an_incompatible_image_with_a_400(en, lifecycle):
    response = en.post(
        "/instances/new/",
        {
            "chip": "ascend-910b",
            "cards": "1",
            "plan": "payg",
            "image": "pytorch-2.2-cuda12",
            "name": "x",
            "term_end_action": "continue",
        },
    )
    assert response.status_code == 400
    assert "does not run on the chosen chip" in response.content.decode()
    assert not Instance.objects.exists()


def test_the_api_refuses_an_incompatible_image_with_a_400(owner_api, lifecycle):
    response = owner_api.post(
        "/api/v1/instances", {"name": "x", "chip": "dcu-z100", "image": "magicmind-1.10"}, format="json"
    )
    body = response.json()
    assert response.status_code == 400 and body["code"] == "incompatible_image"
    assert "pytorch-2.2-dtk24" in body["message"] and not Instance.objects.exists()


def test_the_service_refuses_an_incompatible_or_unseen_image(owner, stranger, lifecycle, community_image):
    request = launching.LaunchRequest(name="x", chip="ascend-910b", image="vllm-0.6-cuda12")
    with pytest.raises(ServiceError) as refused:
        launching.launch(owner, request)
    assert refused.value.code == "incompatible_image" and refused.value.status == 400
    private = community_image(user=stranger, listed=False, base="mindspore-2.3")
    request = launching.LaunchRequest(name="x", chip="ascend-910b", image=f"{private.slug}-npu")
    with pytest.raises(ServiceError) as refused:
        launching.launch(owner, request)
    assert refused.value.code == "unknown_image"  # someone else's private image is as good as missing
    assert not Instance.objects.exists()


def test_the_api_lists_the_images_of_a_chip(anon_api, official_images):
    body = anon_api.get("/api/v1/images", {"chip": "dcu-z100"}).json()
    slugs = {r["slug"] for r in body["results"]}
    assert slugs == {"pytorch-2.2", "paddle-2.6-xtcl", "kylin-dtk24", "case-176b-pretrain-dcu"}


def test_launching_a_variant_counts_a_use_of_its_image(launch, official_images):
    launch(chip="ascend-910b", image="mindspore-2.3-cann8")
    launch(chip="ascend-910b", image="mindspore-2.3-cann8", name="second")
    official_images["mindspore-2.3"].refresh_from_db()
    assert official_images["mindspore-2.3"].usage_count == 2
