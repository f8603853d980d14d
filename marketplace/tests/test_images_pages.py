"""Marketplace pages: browse, filter, the image page with live prices and the one-click clone into the wizard,
clone to my images, who sees what, and query counts that do not grow with images."""

from urllib.parse import parse_qs, urlparse

import pytest
from django.conf import settings
from django.contrib.auth.models import AnonymousUser
from django.db import connection
from django.db.models import F
from django.test.utils import CaptureQueriesContext

from catalog.models import Node
from marketplace.images import services
from marketplace.images.search import ImageQuery
from marketplace.models import Image

pytestmark = pytest.mark.django_db


@pytest.fixture
def en(client):
    client.cookies[settings.LANGUAGE_COOKIE_NAME] = "en"
    return client


def _login(client, user):
    client.force_login(user)
    client.cookies[settings.LANGUAGE_COOKIE_NAME] = "en"
    return client


def test_a_visitor_browses_the_xinchuang_category(en, official_images):
    html = en.get("/marketplace/", {"category": "xinchuang"}).content.decode()
    assert 'data-image="mindspore-2.3"' in html and 'data-image="magicmind-1.10"' in html
    assert 'data-image="vllm-0.6"' not in html
    assert 'id="category-xinchuang"' in html


def test_search_and_filters_on_the_page(en, official_images):
    html = en.get("/marketplace/", {"q": "反欺诈"}).content.decode()
    assert 'data-image="case-bank-antifraud"' in html and 'data-image="pytorch-2.2"' not in html
    partial = en.get("/marketplace/", {"chip": "mlu370-x8"}, HTTP_HX_REQUEST="true").content.decode()
    assert "<html" not in partial and 'data-image="magicmind-1.10"' in partial
    assert 'data-image="mindspore-2.3"' not in partial


def test_bad_filters_are_a_clear_error(en, official_images):
    response = en.get("/marketplace/", {"chip": "no-such-chip"})  # a chip that is not there, as in the API
    assert response.status_code == 404 and "Unknown chip" in response.content.decode()
    response = en.get("/marketplace/", {"sort": "cheapest"})
    assert response.status_code == 400 and 'id="image-error"' in response.content.decode()


def test_the_list_query_count_does_not_grow_with_images(
    en, official_images, community_image, django_assert_max_num_queries
):
    with CaptureQueriesContext(connection) as few:
        en.get("/marketplace/")
    for i in range(12):
        community_image(name=f"Community {i}")
    with django_assert_max_num_queries(len(few.captured_queries)):
        response = en.get("/marketplace/")
    assert response.content.decode().count("data-image=") == Image.objects.listed().count() == 24


def test_the_list_reads_no_descriptions(official_images):

    image = services.search_images(AnonymousUser(), ImageQuery()).first()
    assert {"description", "description_html", "search_text"} <= image.get_deferred_fields()


def test_the_image_page_shows_variants_and_live_subsidised_prices(en, official_images):
    html = en.get("/marketplace/images/mindspore-2.3/").content.decode()
    assert "from ¥1.71/card-hour on Ascend 910B after subsidy" in html  # ¥1.90 less the 10% Xinchuang subsidy
    assert 'data-variant="mindspore-2.3-cann8"' in html and "MindFormers 1.2" in html
    html = en.get("/marketplace/images/pytorch-2.2/").content.decode()
    for family in ("npu", "mlu", "dcu", "cuda"):
        assert f'data-family="{family}"' in html


def test_one_click_clone_opens_the_wizard_prefilled_with_the_cheapest_chip(en, owner, official_images):
    html = en.get("/marketplace/images/pytorch-2.2/").content.decode()
    start = html.index('id="clone-button"')
    href = html[html.rindex('href="', 0, start) + 6 : start].split('"')[0].replace("&amp;", "&")
    url = urlparse(href)
    params = {k: v[0] for k, v in parse_qs(url.query).items()}
    assert url.path == "/instances/new/" and params["image"] == "pytorch-2.2-dtk24" and params["chip"] == "dcu-z100"
    _login(en, owner)
    wizard = en.get(href).content.decode()
    assert '<option value="dcu-z100" selected>' in wizard
    assert '<option value="pytorch-2.2-dtk24" selected>' in wizard and 'id="price-payable"' in wizard


def test_a_full_chip_is_skipped_by_the_clone(en, official_images):

    Node.objects.filter(chip__slug="dcu-z100").update(cards_reserved=F("cards"))
    html = en.get("/marketplace/images/pytorch-2.2/").content.decode()
    assert "chip=dcu-z100" not in html and "chip=mlu370-x8" in html


def test_clone_to_my_images_makes_a_private_copy(client, owner, stranger, official_images):
    _login(client, owner)
    response = client.post("/marketplace/images/mindspore-2.3/clone/")
    copy = Image.objects.get(owner=owner)
    assert response.status_code == 302 and response["Location"] == copy.get_absolute_url()
    assert copy.review_state == "draft" and copy.variants.get().family == "npu"
    assert copy.variants.get().slug != "mindspore-2.3-cann8"
    assert f'data-image="{copy.slug}"' in client.get("/marketplace/mine/").content.decode()
    _login(client, stranger)
    assert client.get(copy.get_absolute_url()).status_code == 404


def test_a_non_reviewed_image_is_invisible_to_others(client, owner, stranger, staff, community_image):
    draft = community_image(listed=False, name="Draft image")
    pending = community_image(listed=False, name="Pending image")

    services.publish(owner, pending)
    for image in (draft, pending):
        for who in (stranger, None):
            client.logout()
            if who:
                _login(client, who)
            assert client.get(image.get_absolute_url()).status_code == 404
            assert f'data-image="{image.slug}"' not in client.get("/marketplace/").content.decode()
    _login(client, staff)
    assert client.get(pending.get_absolute_url()).status_code == 200  # staff review it
    assert client.get(draft.get_absolute_url()).status_code == 404
    _login(client, owner)
    assert client.get(draft.get_absolute_url()).status_code == 200


def test_the_author_sees_the_rejection_reason(client, owner, staff, community_image):

    image = community_image(listed=False)
    services.publish(owner, image)
    _login(client, staff)
    response = client.post(f"/marketplace/review/{image.slug}/", {"decision": "reject", "reason": ""})
    assert Image.objects.get(pk=image.pk).review_state == "pending"  # a rejection needs a reason
    client.post(f"/marketplace/review/{image.slug}/", {"decision": "reject", "reason": "Licence file missing"})
    _login(client, owner)
    html = client.get(image.get_absolute_url()).content.decode()
    assert 'id="rejection-reason"' in html and "Licence file missing" in html
    assert response.status_code == 302


def test_the_review_queue_is_for_staff_only(client, owner, staff, community_image):

    image = community_image(listed=False)
    services.publish(owner, image)
    _login(client, owner)
    assert client.get("/marketplace/review/").status_code == 404  # like /ops/: not even a login redirect
    _login(client, staff)
    assert f'data-image="{image.slug}"' in client.get("/marketplace/review/").content.decode()
    client.post(f"/marketplace/review/{image.slug}/", {"decision": "approve"})
    assert Image.objects.get(pk=image.pk).review_state == "listed"
