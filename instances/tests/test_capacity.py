"""Capacity: concurrent launches never oversell; the rest are told where cards are free."""

from concurrent.futures import ThreadPoolExecutor

import pytest
from django.db import IntegrityError, connection
from django.db.models import F

from catalog import services as catalog_services
from catalog.models import Chip, Node, Zone
from core.errors import Unavailable
from instances import launching
from instances.capacity import CapacityError
from instances.models import Instance
from instances.tests.fixtures import settle

pytestmark = pytest.mark.django_db(transaction=True)


def _grow_to(chip_slug: str, zone_slug: str, cards: int) -> None:
    """Add 8-card nodes until the chip has ``cards`` cards in the zone (and nowhere else is free)."""
    chip, zone = Chip.objects.get(slug=chip_slug), Zone.objects.get(slug=zone_slug)
    n = Node.objects.filter(chip=chip, zone=zone).count()
    while Node.objects.filter(chip=chip, zone=zone).count() * 8 < cards:
        n += 1
        catalog_services.add_node(zone=zone, chip=chip, name=f"extra-{chip_slug}-{n:02d}", cards=8)


def _launch_many(owner, count: int, threads: int) -> list:
    def one(i):
        try:
            request = launching.LaunchRequest(name=f"race-{i}", chip="dcu-z100", image="pytorch-2.2-dtk24")
            return launching.launch(owner, request)
        except Unavailable as exc:
            return exc
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=threads) as pool:
        return list(pool.map(one, range(count)))


def _assert_exactly(results, free_cards: int):
    won = [r for r in results if isinstance(r, Instance)]
    refused = [r for r in results if isinstance(r, CapacityError)]
    assert len(won) == free_cards and len(refused) == len(results) - free_cards
    # none oversold, and the node counters equal what the instances hold
    assert not Node.objects.filter(cards_reserved__gt=F("cards")).exists()
    dcu = Node.objects.filter(chip__slug="dcu-z100")
    assert sum(dcu.values_list("cards_reserved", flat=True)) == free_cards
    assert sum(Instance.objects.values_list("reserved_cards", flat=True)) == free_cards
    # the rest are told why, and where cards of other chips are free now
    message = str(refused[0].message)
    assert "Hygon DCU Z100" in message or "海光" in message
    assert refused[0].alternatives and all(a.chip.slug != "dcu-z100" for a in refused[0].alternatives)
    return won


@pytest.fixture
def many_machines(settings):
    """These races launch more machines for one account than its default limit allows: the cards are the limit."""
    settings.ACCOUNT_MAX_MACHINES = 1000


@pytest.mark.postgres
def test_200_concurrent_launches_for_64_free_cards_on_postgresql(owner, lifecycle, eager_tasks, many_machines):
    _grow_to("dcu-z100", "cn-east-xc", 64)
    results = _launch_many(owner, 200, threads=50)
    _assert_exactly(results, 64)
    settle()
    assert Instance.objects.filter(status="running").count() == 64


def test_concurrent_launches_never_oversell_on_sqlite(owner, lifecycle, eager_tasks, many_machines):
    results = _launch_many(owner, 40, threads=10)  # 16 DCU cards in the catalog
    _assert_exactly(results, 16)
    settle()
    assert Instance.objects.filter(status="running").count() == 16


def test_the_database_refuses_an_oversold_node_whatever_the_code_path(catalog):
    node = Node.objects.first()
    with pytest.raises(IntegrityError):
        Node.objects.filter(pk=node.pk).update(cards_reserved=node.cards + 1)
