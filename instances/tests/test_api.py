"""Public catalog API: chips, zones and specs for every persona."""

import pytest

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("persona", ["anon_api", "owner_api", "teammate_api", "stranger_api"])
def test_everyone_can_list_chips_zones_and_specs(request, catalog, persona):
    api = request.getfixturevalue(persona)

    chips = api.get("/api/v1/chips").json()
    zones = api.get("/api/v1/zones/").json()
    specs = api.get("/api/v1/specs").json()

    assert chips["count"] == 7
    assert {z["slug"] for z in zones["results"]} == {"cn-east-xc", "cn-east-a"}
    assert specs["count"] == 25


def test_a_chip_shows_published_figures_as_strings_and_the_rest_as_null(anon_api, catalog):
    chip = anon_api.get("/api/v1/chips/ascend-910b").json()
    mlu = anon_api.get("/api/v1/chips/mlu370-x8").json()

    assert chip["tflops_bf16"] == "280.000"
    assert chip["scaling_efficiency"] == [{"cards": 16, "efficiency": "0.9480"}, {"cards": 64, "efficiency": "0.9410"}]
    assert mlu["tflops_bf16"] is None
    assert mlu["resnet50"]["images_per_s"] == 7800


def test_zones_show_what_they_offer_in_cards(anon_api, catalog):
    zone = anon_api.get("/api/v1/zones/cn-east-xc").json()

    assert zone["xinchuang"] is True
    assert {o["chip"]: o["cards"] for o in zone["offers"]} == {"ascend-910b": 32, "mlu370-x8": 16, "dcu-z100": 16}


def test_an_unknown_chip_is_a_404(anon_api, catalog):
    assert anon_api.get("/api/v1/chips/h100").status_code == 404


def test_the_catalog_cannot_be_changed_through_the_api(owner_api, catalog):
    assert owner_api.post("/api/v1/chips", {"slug": "x"}, format="json").status_code == 405
    assert owner_api.delete("/api/v1/zones/cn-east-xc").status_code == 405
