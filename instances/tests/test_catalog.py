"""The catalog: loading it, the Xinchuang zone rule, specs and figures that were never published."""

from decimal import Decimal

import pytest
from django.core.exceptions import ValidationError
from django.core.management import call_command

from billing.models import Plan, Price
from catalog import services as catalog_services
from catalog.models import Chip, InstanceSpec, Node, Zone
from core.errors import ServiceError
from tests.fixtures.catalog import empty_catalog

pytestmark = pytest.mark.django_db


def _counts():
    return [m.objects.count() for m in (Chip, Zone, Node, InstanceSpec, Price, Plan)]


def test_load_catalog_is_idempotent():
    empty_catalog()  # the test database starts with the catalog: this test loads it from nothing
    call_command("load_catalog")
    first = _counts()
    call_command("load_catalog")

    assert _counts() == first
    assert first[:3] == [7, 2, 15]


def test_load_catalog_keeps_what_staff_changed(catalog):
    Plan.objects.filter(slug="daily").update(factor=Decimal("0.85"))

    call_command("load_catalog")

    assert Plan.objects.get(slug="daily").factor == Decimal("0.85")


def test_figures_that_were_never_published_stay_empty(catalog):
    mlu = catalog["mlu370-x8"]

    assert mlu.tflops_bf16 is None
    assert mlu.mfu is None
    assert mlu.memory_gb == 48
    assert catalog["ascend-910b"].mfu == Decimal("0.613")
    assert [(f.cards, f.efficiency) for f in catalog["ascend-910b"].scaling_figures.all()] == [
        (16, Decimal("0.948")),
        (64, Decimal("0.941")),
    ]


def test_the_xinchuang_zone_refuses_a_foreign_chip(catalog, xinchuang_zone):
    with pytest.raises(ServiceError, match="domestic chips only"):
        catalog_services.add_node(zone=xinchuang_zone, chip=catalog["a100-80g"], name="bad-01", cards=8)
    with pytest.raises(ValidationError):
        Node(zone=xinchuang_zone, chip=catalog["rtx-4090"], name="bad-02", cards=8).full_clean()


def test_the_xinchuang_zone_holds_only_domestic_chips(catalog, xinchuang_zone):
    assert set(Node.objects.filter(zone=xinchuang_zone).values_list("chip__xinchuang", flat=True)) == {True}


def test_a_zone_with_foreign_cards_cannot_become_a_xinchuang_zone(general_zone):
    general_zone.xinchuang = True

    with pytest.raises(ValidationError):
        general_zone.full_clean()


def test_domestic_chips_can_go_in_the_general_zone(catalog, general_zone):
    node = catalog_services.add_node(zone=general_zone, chip=catalog["dcu-z100"], name="a-dcu-01", cards=8)

    assert node.backend_name == "simulated"


def test_specs_scale_with_cards_and_there_is_a_no_card_mode(catalog):
    specs = {s.cards: s for s in InstanceSpec.objects.filter(chip__slug="ascend-910b")}
    no_card = InstanceSpec.objects.get(chip=None)

    assert sorted(specs) == [1, 2, 4, 8]
    assert specs[8].vcpus == 8 * specs[1].vcpus
    assert specs[8].memory_gb == 8 * specs[1].memory_gb
    assert specs[8].system_disk_gb == 8 * specs[1].system_disk_gb
    assert no_card.cards == 0 and no_card.is_no_card


def test_a_spec_must_have_1_2_4_or_8_cards(catalog):
    with pytest.raises(ValidationError):
        InstanceSpec(slug="x", chip=catalog["a100-80g"], cards=3, vcpus=1, memory_gb=1, system_disk_gb=1).full_clean()


def test_zone_offers_list_the_xinchuang_zone_first_for_domestic_chips(catalog):
    offers = catalog_services.zone_offers()

    assert [o.zone.slug for o in offers[catalog["ascend-910b"].pk]] == ["cn-east-xc", "cn-east-a"]
    assert offers[catalog["ascend-910b"].pk][0].cards == 32


def test_a_drained_node_offers_no_capacity(catalog):
    Node.objects.filter(chip__slug="a800-80g").update(drained=True)

    assert catalog["a800-80g"].pk not in catalog_services.zone_offers()
