"""Every test database holds the catalog as ``manage.py load_catalog`` writes it, loaded once when the database is
set up; a transactional test's flush deletes what that test wrote and leaves the catalog whole again."""

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.db.models import F

from billing import seed as pricing_seed
from billing.models import Plan, Price, SubsidyProgramme
from catalog import seed as catalog_seed
from catalog.models import Chip, InstanceSpec, Node, Region, Zone

User = get_user_model()
CATALOG_MODELS = (Region, Zone, Chip, Node, InstanceSpec, Price, Plan, SubsidyProgramme)


def _catalog_rows() -> dict:
    return {model.__name__: model.objects.count() for model in CATALOG_MODELS}


@pytest.mark.django_db
def test_a_test_database_starts_with_the_whole_catalog_and_loading_it_again_adds_nothing():
    places, pricing = catalog_seed.read(), pricing_seed.read()
    # a test that asks for no catalog still has it
    assert sorted(Chip.objects.values_list("slug", flat=True)) == sorted(entry["slug"] for entry in places["chip"])
    assert Zone.objects.count() == len(places["zone"]) and Region.objects.count() == len(places["region"])
    assert Plan.objects.count() == len(pricing["plan"])
    assert SubsidyProgramme.objects.count() == len(pricing["subsidy"])
    assert Node.objects.exists() and Price.objects.exists() and InstanceSpec.objects.exists()
    # loaded once: the loader finds every row there already
    created = catalog_seed.load() | pricing_seed.load()
    assert created and not any(created.values()), created


@pytest.mark.django_db(transaction=True)
def test_a_flush_deletes_the_tests_rows_and_leaves_the_catalog_as_it_began():
    before = _catalog_rows()
    # given a transactional test that wrote a user, deleted a plan and reserved every node's cards
    User.objects.create_user(email="flushed@example.com", password="x")
    Plan.objects.filter(slug="daily").delete()
    Node.objects.update(cards_reserved=F("cards"))
    # when its database is flushed, as pytest-django does when such a test ends
    call_command("flush", interactive=False, verbosity=0)
    # then the user is gone and the catalog is as the loader writes it
    assert not User.objects.filter(email="flushed@example.com").exists()
    assert _catalog_rows() == before
    assert Plan.objects.filter(slug="daily").exists()
    assert not Node.objects.filter(cards_reserved__gt=0).exists()


@pytest.mark.django_db(transaction=True)
def test_a_transactional_test_that_changes_the_catalog():
    # (the next test checks that this one's changes are gone: transactional tests keep their order)
    Plan.objects.filter(slug="daily").delete()
    Node.objects.update(cards_reserved=F("cards"))
    assert not Plan.objects.filter(slug="daily").exists()


@pytest.mark.django_db(transaction=True)
def test_after_a_transactional_test_the_next_one_finds_the_catalog_whole():
    assert Plan.objects.filter(slug="daily").exists()
    assert not Node.objects.filter(cards_reserved__gt=0).exists()
    assert Chip.objects.count() == len(catalog_seed.read()["chip"])
