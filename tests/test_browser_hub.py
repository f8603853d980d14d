"""In real headless Chromium: search the hub in Chinese (htmx, the URL follows), open ChatGLM3-6B, like it."""

import pytest
from django.conf import settings
from django.test import Client

from marketplace import seed as hub_catalog
from tests.fixtures.services import screenshot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_developer_finds_a_chinese_chat_model_and_likes_it(page, live_server, owner, catalog):
    hub_catalog.load()
    session = Client()
    session.force_login(owner)
    host = live_server.url.split("//", 1)[1].split(":")[0]
    page.context.add_cookies(
        [
            {
                "name": settings.SESSION_COOKIE_NAME,
                "value": session.cookies[settings.SESSION_COOKIE_NAME].value,
                "domain": host,
                "path": "/",
            },
            {"name": settings.LANGUAGE_COOKIE_NAME, "value": "en", "domain": host, "path": "/"},
        ]
    )

    # Search in Chinese: results update in place and the URL carries the query
    page.goto(f"{live_server.url}/marketplace/hub/")
    page.fill("#id_q", "对话")
    page.wait_for_url("**/marketplace/hub/?q=*")
    results = page.locator("#hub-items")
    assert results.get_by_role("link", name="THUDM/chatglm3-6b").is_visible()
    assert results.get_by_role("link", name="microsoft/resnet-50").count() == 0
    page.select_option("#id_chip", "mlu")
    page.wait_for_url("**chip=mlu*")
    assert results.get_by_role("link", name="THUDM/chatglm3-6b").is_visible()
    screenshot(page, "hub-01-search-zh")

    # The item's page: rendered card, files, chips with prices, the honest mount button
    results.get_by_role("link", name="THUDM/chatglm3-6b").click()
    page.wait_for_url("**/marketplace/hub/THUDM/chatglm3-6b")
    assert page.locator("#hub-card h1").inner_text() == "chatglm3-6b"
    assert page.locator("#hub-files").is_visible()
    assert "/card-hour on Ascend 910B" in page.locator("#hub-chips").inner_text()
    assert page.locator("#mount-cta").is_visible()

    # Like it: the button swaps in place and the count goes up
    page.locator("#like-toggle").click()
    page.wait_for_selector("#like-toggle[aria-pressed=true]")
    assert page.locator("#likes-count").inner_text() == "1"
    screenshot(page, "hub-02-item-liked")
