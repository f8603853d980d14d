"""Likes: one per user and item, counted, toggled with htmx on the page, and only on items the user can see."""

import pytest
from django.test import Client

from marketplace.hub import services
from marketplace.models import HubLike

pytestmark = pytest.mark.django_db

URL = "/api/v1/hub/THUDM/chatglm3-6b/like"


def test_liking_twice_counts_once_and_unliking_removes_it(chat_models, owner_api, stranger_api):
    first = owner_api.post(URL)
    assert first.status_code == 200 and first.json() == {"liked": True, "likes_count": 1}
    assert owner_api.post(URL).json() == {"liked": True, "likes_count": 1}
    assert stranger_api.post(URL).json() == {"liked": True, "likes_count": 2}
    assert owner_api.delete(URL).json() == {"liked": False, "likes_count": 1}
    assert owner_api.delete(URL).json() == {"liked": False, "likes_count": 1}
    assert HubLike.objects.count() == 1


def test_the_service_likes_once_per_user(chat_models, owner):
    item = chat_models["qwen"]
    assert services.like(owner, item) is True
    assert services.like(owner, item) is False
    assert services.refresh_counts(item).likes_count == 1


def test_anonymous_and_read_only_callers_cannot_like(chat_models, anon_api, teammate_api):
    assert anon_api.post(URL).status_code == 401
    response = teammate_api.post(URL, HTTP_ACCEPT_LANGUAGE="en")
    assert response.status_code == 403 and "read-only" in response.json()["message"]
    assert HubLike.objects.count() == 0


def test_nobody_can_like_a_private_item_they_cannot_see(make_item, owner, stranger_api, owner_api):
    make_item("owner-lab/secret", owner=owner, visibility="private")
    missing = stranger_api.post("/api/v1/hub/owner-lab/no-such-item/like", HTTP_ACCEPT_LANGUAGE="en")
    hidden = stranger_api.post("/api/v1/hub/owner-lab/secret/like", HTTP_ACCEPT_LANGUAGE="en")
    assert hidden.status_code == missing.status_code == 404
    assert hidden.json()["code"] == missing.json()["code"] == "not_found"
    assert owner_api.post("/api/v1/hub/owner-lab/secret/like").json()["liked"] is True


def test_the_like_button_toggles_with_htmx(chat_models, owner_client):
    url = "/marketplace/hub/THUDM/chatglm3-6b/like"
    response = owner_client.post(url, HTTP_HX_REQUEST="true")
    html = response.content.decode()
    assert response.status_code == 200 and 'id="like-button"' in html and "<html" not in html
    assert 'aria-pressed="true"' in html and 'id="likes-count">1<' in html
    html = owner_client.post(url, HTTP_HX_REQUEST="true").content.decode()
    assert 'aria-pressed="false"' in html and 'id="likes-count">0<' in html


def test_a_plain_form_post_comes_back_to_the_item(chat_models, owner_client):
    response = owner_client.post("/marketplace/hub/THUDM/chatglm3-6b/like")
    assert response.status_code == 302 and response["Location"] == "/marketplace/hub/THUDM/chatglm3-6b"


def test_an_anonymous_like_goes_to_the_login_page(chat_models, client):
    response = client.post("/marketplace/hub/THUDM/chatglm3-6b/like")
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]
    assert HubLike.objects.count() == 0


def test_the_item_page_shows_each_persons_own_like_read_with_the_item(
    chat_models, catalog, owner, owner_client, stranger, django_assert_max_num_queries
):
    stranger_client = Client()
    stranger_client.force_login(stranger)
    services.like(owner, chat_models["chatglm"])
    url = "/marketplace/hub/THUDM/chatglm3-6b"
    owner_client.get(url)  # the files, commits and chip prices shared by everyone are kept after a first look
    # Session and user (2), the item with the like (1), the price book's version and live part (2), the student
    # discount (1), the machines it could be mounted into (1).
    with django_assert_max_num_queries(7):
        mine = owner_client.get(url)
    theirs = stranger_client.get(url)
    assert mine.status_code == theirs.status_code == 200
    assert 'aria-pressed="true"' in mine.content.decode()
    assert 'aria-pressed="false"' in theirs.content.decode()
