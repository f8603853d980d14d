"""Rows read as values and built into models only when a kept row is rendered afresh."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from console.value_rows import PreparedRows, ValueRows
from instances.models import Instance
from instances.tests.fixtures import settle

pytestmark = pytest.mark.django_db


def test_a_row_builds_the_instance_and_its_related_rows_from_its_values(launch):
    carded = launch(name="npu-box", chip="ascend-910b", cards=2)
    bare = launch(name="cpu-box", no_card=True)
    settle()
    rows = ValueRows(
        Instance.objects.filter(pk__in=[carded.pk, bare.pk]).order_by("name"),
        ("name", "status", "cards", "chip__name", "zone__name"),
    )
    expected = Instance.objects.get(pk=carded.pk)
    with CaptureQueriesContext(connection) as read:
        cpu, npu = (row.object for row in rows.rows(rows.values))
        shown = (npu.pk, npu.name, npu.status, npu.cards, npu.chip.name, npu.chip_id, npu.zone.name)
        bare_shown = (cpu.name, cpu.chip, cpu.chip_id)
    # One query, for the values: none per row, per relation or for a relation's key.
    assert len(read.captured_queries) == 1
    assert shown == (carded.pk, "npu-box", expected.status, 2, "Ascend 910B", expected.chip_id, expected.zone.name)
    assert bare_shown == ("cpu-box", None, None)
    # A column the rows did not read is deferred, as with only(): read, it costs a query and is right.
    image = Instance.objects.get(pk=carded.pk).image
    with CaptureQueriesContext(connection) as deferred:
        assert npu.image == image
    assert len(deferred.captured_queries) == 1


def test_a_row_key_is_its_values_and_changes_with_them(launch):
    instance = launch(name="one")
    rows = ValueRows(Instance.objects.filter(pk=instance.pk), ("name", "chip__name"))
    (before,) = rows.rows(rows.values)
    Instance.objects.filter(pk=instance.pk).update(name="two")
    (after,) = rows.rows(rows.values)
    assert before.key != after.key and after.object.name == "two"
    assert rows.index("name") == 1 and after.key[rows.index("chip__name")] == "Ascend 910B"


def test_only_the_rows_a_model_points_to_are_read():
    with pytest.raises(ValueError, match="one level deep"):
        ValueRows(Instance.objects.all(), ("chip__family__name",))
    with pytest.raises(ValueError, match="one level deep"):
        ValueRows(Instance.objects.all(), ("events__detail",))  # rows that point to it: not one row


def test_a_paginator_pages_the_rows_and_counts_them_without_joining(launch):
    from django.core.paginator import Paginator

    for n in range(3):
        launch(name=f"p{n}")
    rows = ValueRows(Instance.objects.order_by("name"), ("name", "chip__name"))
    page = Paginator(rows, 2).get_page(2)
    assert page.paginator.count == 3 and [row.object.name for row in page] == ["p2"]
    assert [row.key[rows.index("chip__name")] for row in Paginator(rows, 2).get_page(1)] == ["Ascend 910B"] * 2
    with CaptureQueriesContext(connection) as counted:
        rows.count()
    assert "JOIN" not in counted.captured_queries[0]["sql"]


@pytest.mark.parametrize("both_ends", [False, True])
def test_prepared_rows_count_and_slice_as_the_value_rows_of_the_same_queryset(launch, both_ends):
    for n in range(6):
        launch(name=f"box-{n}")
    settle()
    owner = Instance.objects.order_by("pk").first().owner_id

    def build(owner_id):
        return Instance.objects.filter(owner_id=owner_id).order_by("name", "-pk")

    prepared = PreparedRows(build, ("name", "status", "chip__name"), int, both_ends=both_ends)(owner)
    plain = ValueRows(build(owner), ("name", "status", "chip__name"))
    assert prepared.count() == plain.count() == 6
    for start in range(8):
        for stop in range(start, 9):
            assert [row.key for row in prepared[start:stop]] == [row.key for row in plain[start:stop]]
    (row,) = prepared[2:3]
    assert row.object.name == "box-2" and row.object.chip.name == row.key[prepared.index("chip__name")]
