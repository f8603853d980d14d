"""The test suite's replayed seeds (tests/fixtures/replay.py) write what the real loaders write."""

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
import time_machine
from django.apps import apps
from django.db import connection, models, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from billing import price_version
from billing.models import Plan, Price, PriceBookVersion, SubsidyProgramme
from catalog import seed as instances_seed
from catalog.models import Chip, Node, Region
from core import visitor_cache
from marketplace import seed as hub_seed
from marketplace.models import HubItem
from tests.fixtures import replay
from tests.fixtures.catalog import _load_catalog, load_catalog, load_hub

pytestmark = pytest.mark.django_db


def _content(tables) -> dict:
    """Every row of these models, a foreign key named by the row it points at (its table and place in key order), and
    a moment stamped by the load as "now" — so two loads compare equal whatever keys and clock each got."""
    places = {
        model: {pk: i for i, pk in enumerate(model._base_manager.order_by("pk").values_list("pk", flat=True))}
        for model in tables
    }
    content = {}
    for model in tables:
        rows = []
        for obj in model._base_manager.order_by("pk"):
            row = {}
            for field in model._meta.concrete_fields:
                value = getattr(obj, field.attname)
                if field.primary_key or (isinstance(field, models.UUIDField) and callable(field.default)):
                    continue  # a key, or a random identifier each load draws afresh
                if isinstance(field, models.ForeignKey) and value is not None:
                    target = field.related_model
                    value = (target._meta.db_table, places[target][value] if target in places else value)
                elif isinstance(value, type(timezone.now())) and abs(timezone.now() - value).total_seconds() < 60:
                    value = "now"
                row[field.name] = value
            rows.append(row)
        content[model._meta.db_table] = rows
    return content


@pytest.mark.parametrize(
    ("name", "real", "replayed"),
    [
        ("catalog", _load_catalog, load_catalog),
        ("hub", hub_seed.load, load_hub),
    ],
)
def test_a_replayed_seed_writes_the_rows_the_loader_writes_and_tells_the_caches(name, real, replayed):
    if name == "hub":
        load_catalog()
    replayed()  # the first call in a process records it
    kept = replay._kept[(name, connection.vendor)]
    if name == "hub" and connection.vendor == "sqlite":
        # SQLite's full-text index of the hub is written from Python into a table without a model: the loader runs
        assert kept == replay.NEVER and HubItem.objects.filter(owner__isnull=True).count() == len(hub_seed.entries())
        return
    assert kept != replay.NEVER, f"the {name} seed cannot be replayed: every test loading it pays for the real loader"
    for model, _names, _rows in reversed(kept):
        model._base_manager.all().delete()
    token, generation = price_version.current(), visitor_cache._generation("hub-list")
    with CaptureQueriesContext(connection) as queries:
        replayed()
    assert len(queries) < 40  # replayed: a statement a table, not the loader's hundreds
    if name == "catalog":
        assert price_version.current() != token  # every process builds its price book again
    else:
        assert visitor_cache._generation("hub-list") != generation  # a visitor's hub page is built again

    # every table (but the price version's random token), so that a table the replay missed shows
    everything = [model for model in apps.get_models(include_auto_created=True) if model is not PriceBookVersion]
    with_replay = _content(everything)
    assert sum(len(with_replay[model._meta.db_table]) for model, _names, _rows in kept) > 20
    # the replayed tables emptied, then the real loader
    with transaction.atomic():
        for model, _names, _rows in reversed(kept):
            model._base_manager.all().delete()
        real()
        with_loader = _content(everything)
        transaction.set_rollback(True)
    assert with_loader == with_replay


def test_where_the_test_has_rows_of_its_own_the_real_loader_runs_and_keeps_them():
    load_catalog()
    Plan.objects.filter(slug="daily").update(factor=Decimal("0.5"))
    load_catalog()  # a replay would insert the same keys again; the loader leaves an edited plan as it is
    assert Plan.objects.get(slug="daily").factor == Decimal("0.5")
    assert Chip.objects.count() == len(instances_seed.read()["chip"])


def test_a_seed_is_recorded_only_from_a_clean_start():
    Region.objects.create(slug="made-by-the-test", name="A test's own region")
    assert replay._record(_load_catalog, frozenset({"billing_pricebookversion"})) == replay.NOT_NOW
    Region.objects.all().delete()
    kept = replay._record(_load_catalog, frozenset({"billing_pricebookversion"}))
    assert {model for model, _names, _rows in kept} >= {Region, Chip, Plan, SubsidyProgramme.chips.through}
    assert not Chip.objects.exists()  # the recording was rolled back


def test_under_a_frozen_clock_the_replayed_rows_are_made_at_that_time():
    load_catalog()  # recorded (if it was not yet) at today's time
    then = datetime(2031, 5, 6, 7, 8, tzinfo=UTC)
    with transaction.atomic():
        for model, _names, _rows in reversed(replay._kept[("catalog", connection.vendor)]):
            model._base_manager.all().delete()
        with time_machine.travel(then, tick=False), CaptureQueriesContext(connection) as queries:
            load_catalog()
        assert len(queries) < 40  # replayed: a statement a table, not the loader's hundreds
        made = [*Node.objects.values_list("created_at", flat=True), *Price.objects.values_list("created_at", flat=True)]
        transaction.set_rollback(True)
    assert len(made) > 10 and all(abs(moment - then) < timedelta(seconds=5) for moment in made)
