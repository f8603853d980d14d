"""The catalog moved out of the instances app with its tables: a database populated under the old schema migrates
forward with every row, every foreign key and the content types intact (and back again)."""

from datetime import UTC, datetime
from decimal import Decimal

import pytest

from tests.fixtures.catalog import empty_catalog

pytestmark = pytest.mark.django_db(transaction=True)

# The schema just before the catalog app: every app that points at the catalog, at its migration before the move.
BEFORE = [
    ("catalog", None),
    ("instances", "0006_instance_price_help"),
    ("billing", "0005_instance_notifications"),
    ("storage", "0003_disk_arrears_retention"),
    ("console", "0003_staff_roles"),
]
AT = datetime(2026, 3, 2, 8, 0, tzinfo=UTC)


def _before_the_move(migrator):
    """The schema before the catalog app, holding none of the catalog the test database was loaded with."""
    empty_catalog()
    return migrator.to(BEFORE)


def _populate(old):
    """Rows of every kind that points at the catalog, written with the old schema's models."""
    get = old.get_model
    region = get("instances", "Region").objects.create(slug="cn-east", name="East China", name_zh="华东")
    zone = get("instances", "Zone").objects.create(region=region, slug="cn-east-xc", name="Xinchuang", xinchuang=True)
    chip = get("instances", "Chip").objects.create(
        slug="ascend-910b", name="Ascend 910B", vendor="Huawei", backend="npu", xinchuang=True
    )
    get("instances", "ScalingFigure").objects.create(chip=chip, cards=16, efficiency=Decimal("0.9480"))
    node = get("instances", "Node").objects.create(zone=zone, chip=chip, name="xc-1", cards=8, cards_reserved=2)
    spec = get("instances", "InstanceSpec").objects.create(
        slug="910b-2", chip=chip, cards=2, vcpus=16, memory_gb=128, system_disk_gb=100
    )
    user = get("console", "User").objects.create(email="before@example.com", password="!")
    plan = get("billing", "Plan").objects.create(
        slug="payg", name="Pay as you go", factor=Decimal("1"), period_minutes=1, spot_factor=Decimal("0.6")
    )
    get("billing", "Price").objects.create(chip=chip, per_hour=Decimal("3.20"), effective_from=AT)
    programme = get("billing", "SubsidyProgramme").objects.create(
        slug="xc-2026", name="Xinchuang 2026", rate=Decimal("0.3"), starts_at=AT
    )
    programme.chips.add(chip)
    programme.zones.add(zone)
    get("instances", "Instance").objects.create(
        owner=user,
        name="kept",
        zone=zone,
        chip=chip,
        spec=spec,
        cards=2,
        node=node,
        reserved_cards=2,
        plan=plan,
        image="pytorch-2.2-cann8",
    )
    get("storage", "CloudDisk").objects.create(owner=user, name="data", size_gb=100, zone=zone)
    get("console", "CapacitySnapshot").objects.create(at=AT, zone=zone, chip=chip, cards_total=8, cards_used=2)
    content_types = get("contenttypes", "ContentType").objects
    content_types.get_or_create(app_label="instances", model="zone")


def test_a_database_populated_before_the_catalog_app_migrates_without_losing_a_row(migrator):
    old = _before_the_move(migrator)
    _populate(old)

    new = migrator.to_latest()

    get = new.get_model
    zone = get("catalog", "Zone").objects.get(slug="cn-east-xc")
    chip = get("catalog", "Chip").objects.get(slug="ascend-910b")
    assert zone.region.name_zh == "华东" and zone.xinchuang
    assert [f.cards for f in get("catalog", "ScalingFigure").objects.filter(chip=chip)] == [16]
    node = get("catalog", "Node").objects.get(name="xc-1")
    assert (node.zone_id, node.chip_id, node.cards_reserved) == (zone.pk, chip.pk, 2)
    assert get("catalog", "InstanceSpec").objects.get(slug="910b-2").chip_id == chip.pk
    instance = get("instances", "Instance").objects.get(name="kept")
    assert (instance.zone_id, instance.chip_id, instance.node_id) == (zone.pk, chip.pk, node.pk)
    assert get("billing", "Price").objects.get(chip=chip).per_hour == Decimal("3.20")
    programme = get("billing", "SubsidyProgramme").objects.get(slug="xc-2026")
    assert list(programme.chips.values_list("slug", flat=True)) == ["ascend-910b"]
    assert list(programme.zones.values_list("slug", flat=True)) == ["cn-east-xc"]
    assert get("storage", "CloudDisk").objects.get(name="data").zone_id == zone.pk
    assert get("console", "CapacitySnapshot").objects.get(at=AT).chip_id == chip.pk
    content_types = get("contenttypes", "ContentType").objects
    assert content_types.filter(app_label="catalog", model="zone").exists()
    assert not content_types.filter(app_label="instances", model="zone").exists()


def test_the_move_can_be_migrated_back(migrator):
    old = _before_the_move(migrator)
    _populate(old)
    migrator.to_latest()

    back = migrator.to(BEFORE)

    assert back.get_model("instances", "Zone").objects.get(slug="cn-east-xc").region.slug == "cn-east"
    assert back.get_model("contenttypes", "ContentType").objects.filter(app_label="instances", model="zone").exists()
