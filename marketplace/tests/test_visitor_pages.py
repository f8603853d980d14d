"""The marketplace and the hub as a visitor who is not logged in sees them: rendered once, then served from the
cache without a query, and a new generation as soon as an image or an item is listed or changed."""

from decimal import Decimal

import pytest
from django.conf import settings
from django.core.cache import cache
from django.db import connection
from django.db.models import F
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from billing.models import Price
from catalog.models import Node
from instances.models import InstanceEvent
from marketplace.hub import repos
from marketplace.images import services as image_services

pytestmark = pytest.mark.django_db


@pytest.fixture
def en(client):
    client.cookies[settings.LANGUAGE_COOKIE_NAME] = "en"
    return client


def _shows(client, path, text) -> bool:
    response = client.get(path)
    assert response.status_code == 200
    return text in response.content.decode()


def test_a_visitors_marketplace_is_served_from_the_cache_and_shows_an_image_listed_or_renamed_at_once(
    en, owner, staff, community_image, django_assert_num_queries
):
    first = community_image(name="Visitor Vision")
    second = community_image(name="Second Sight", listed=False)
    assert _shows(en, "/marketplace/", f'data-image="{first.slug}"')
    with django_assert_num_queries(0):
        assert not _shows(en, "/marketplace/", f'data-image="{second.slug}"')

    # Published and approved: each an update() of its review state, which sends no signal.
    second = image_services.review_image(image_services.publish(owner, second), True, "", staff)
    assert _shows(en, "/marketplace/", f'data-image="{second.slug}"')
    second.name = "Third Eye"
    image_services.save_edits(second)
    assert _shows(en, "/marketplace/", "Third Eye")


def test_a_logged_in_users_marketplace_is_built_for_them(en, owner, community_image):
    en.force_login(owner)
    assert _shows(en, "/marketplace/", "My images")  # their own links, never a visitor's page


def test_a_visitors_hub_list_is_served_from_the_cache_and_shows_a_new_item_at_once(
    en, make_item, django_assert_num_queries
):
    make_item("acme/first-model", summary="The first one.")
    assert _shows(en, "/marketplace/hub/", "acme/first-model")
    with django_assert_num_queries(0):
        assert _shows(en, "/marketplace/hub/", "acme/first-model")

    make_item("acme/second-model", summary="Another one.")
    assert _shows(en, "/marketplace/hub/", "acme/second-model")
    assert _shows(en, "/marketplace/hub/?q=second", "acme/second-model")
    assert not _shows(en, "/marketplace/hub/?q=first", "acme/second-model")


def test_a_repository_taken_down_leaves_the_visitors_hub_list_at_once(en, make_item):

    item = make_item("acme/doubtful-model", summary="Taken down soon.")
    assert _shows(en, "/marketplace/hub/", "acme/doubtful-model")
    repos.take_down(item, "Licence complaint")
    assert not _shows(en, "/marketplace/hub/", "acme/doubtful-model")
    repos.restore(item)
    assert _shows(en, "/marketplace/hub/", "acme/doubtful-model")


def test_a_search_is_always_built_and_never_kept(en, make_item, django_assert_max_num_queries):
    make_item("acme/first-model", summary="The first one.")
    en.get("/marketplace/hub/?q=first")
    with CaptureQueriesContext(connection) as searched:
        assert _shows(en, "/marketplace/hub/?q=first", "acme/first-model")
    assert len(searched) > 0


def _offers(html: str) -> str:
    return html.split('id="image-chips"')[1].split("</ul>")[0]


def test_a_visitors_image_page_is_kept_and_shows_a_change_to_the_image_or_its_prices_at_once(
    en, owner, staff, community_image, catalog, django_assert_max_num_queries
):

    image = community_image(name="Kept Vision")
    path = image.get_absolute_url()
    first = en.get(path).content.decode().split('id="main"')[1]
    assert "Kept Vision" in first
    with django_assert_max_num_queries(4):  # the image itself (it may have been taken down) and the price book
        assert en.get(path).content.decode().split('id="main"')[1] == first

    image.name = "Kept Vision Two"
    image_services.save_edits(image)
    assert _shows(en, path, "Kept Vision Two")
    variant = image.variants.first()
    variant.os = "Kylin V10 SP3"  # as the admin edits a variant
    variant.save()
    assert _shows(en, path, "Kylin V10 SP3")

    before = _offers(en.get(path).content.decode())
    for chip in {price.chip for price in Price.objects.filter(chip__isnull=False).select_related("chip")}:
        Price.objects.create(chip=chip, per_hour=Decimal("9.99"), effective_from=timezone.now(), note="new list")
    after = _offers(en.get(path).content.decode())
    assert after != before and "¥9.99" in after


def test_a_logged_in_users_image_page_is_built_for_them(en, owner, community_image):
    image = community_image(name="Their Vision")
    assert not _shows(en, image.get_absolute_url(), 'id="clone-mine-button"')
    en.force_login(owner)
    assert _shows(en, image.get_absolute_url(), 'id="clone-mine-button"')


def test_a_signed_in_users_image_page_keeps_what_everyone_sees_and_shows_a_change_at_once(
    en, stranger, community_image, catalog
):
    """The variants, the chips they run on and the ratings are kept; a change to a variant or a price shows on the
    next view, and the page is still built for the user (their buttons, their prices, the cards free now)."""
    image = community_image(name="Shared Vision")
    path = image.get_absolute_url()
    en.force_login(stranger)
    with CaptureQueriesContext(connection) as first:
        assert _shows(en, path, 'id="clone-mine-button"')
    with CaptureQueriesContext(connection) as second:
        before = _offers(en.get(path).content.decode())
    assert len(second) <= len(first) - 3  # variants, chips, ratings: kept

    variant = image.variants.first()
    variant.os = "openEuler 22.03 LTS SP4"
    variant.save()
    assert _shows(en, path, "openEuler 22.03 LTS SP4")
    for chip in {price.chip for price in Price.objects.filter(chip__isnull=False).select_related("chip")}:
        Price.objects.create(chip=chip, per_hour=Decimal("8.88"), effective_from=timezone.now(), note="new list")
    after = _offers(en.get(path).content.decode())
    assert after != before and "¥8.88" in after


def test_a_signed_in_users_repository_page_shows_a_new_commit_at_once(en, stranger, owner, catalog):
    item = repos.create_repo(owner, name="kept-model", organization=None, private=False, kind="model")
    en.force_login(stranger)
    path = f"/marketplace/hub/{item.repo}"
    assert _shows(en, path, item.repo) and not _shows(en, path, "first words")
    repos.commit_card(owner, item, "# Kept\n", summary="first words")
    assert _shows(en, path, "first words")
    repos.commit_card(owner, item, "# Kept again\n", summary="second words")
    assert _shows(en, path, "second words")


def test_a_new_rating_shows_at_once_on_the_image_page_of_the_user_who_gave_it(
    en, stranger, community_image, catalog, monkeypatch
):
    """A signed-in user who rates an image is sent back to its page: their rating is listed there at once."""
    image = community_image(name="Rated Vision")
    path = image.get_absolute_url()
    en.force_login(stranger)
    assert en.get(path).status_code == 200  # the page is kept for this state of the book
    monkeypatch.setattr(image_services, "ran_image", lambda user, image, variants=None: True)
    image_services.rate(stranger, image, 4, "a comment only the rater wrote")
    page = en.get(path).content.decode()
    assert "(1)" in page and "a comment only the rater wrote" in page


def test_the_free_cards_an_image_page_names_follow_a_launch_elsewhere(en, stranger, community_image, catalog):
    """The image page says "N cards free now" and offers one-click clone on the cheapest chip with free cards: read
    at most every few seconds (other users' launches reserve cards without telling the page), the same for all."""
    image = community_image(name="Busy Vision")
    path = image.get_absolute_url()
    en.force_login(stranger)
    assert "free now" in en.get(path).content.decode()
    Node.objects.update(cards_reserved=F("cards"))  # every card taken by other users' launches
    with CaptureQueriesContext(connection) as soon:
        assert "free now" in en.get(path).content.decode()  # read a moment ago
    assert not any("instances_node" in query["sql"] for query in soon)
    cache.clear()  # FREE_CARDS_SECONDS later: the cache has forgotten them (Redis counts real seconds)
    assert "no free cards right now" in en.get(path).content.decode()


def test_a_user_who_ran_an_image_is_offered_to_rate_it_without_their_runs_read_again(
    en, stranger, community_image, catalog, launch
):
    image = community_image(name="Run Vision")
    path = image.get_absolute_url()
    en.force_login(stranger)
    assert 'id="rating-form"' not in en.get(path).content.decode()  # never ran it
    instance = launch(user=stranger, name="ran-it", image=image.variants.get(family="npu").slug)
    InstanceEvent.objects.create(instance=instance, old="starting", new="running", at=timezone.now())
    with CaptureQueriesContext(connection) as first:
        assert 'id="rating-form"' in en.get(path).content.decode()
    with CaptureQueriesContext(connection) as later:
        assert 'id="rating-form"' in en.get(path).content.decode()

    def runs_read(queries):
        return sum("instances_instanceevent" in query["sql"] for query in queries)

    assert runs_read(first) == 1 and runs_read(later) == 0  # ran once, ran for good
