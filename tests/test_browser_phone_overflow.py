"""In real headless Chromium at a phone's 390 px: the pages a newcomer reaches first never scroll sideways, in
Chinese or in English (the wallet's sub-navigation, the price calculator's result, the SSH-key alert)."""

import pytest
from django.conf import settings
from django.test import Client

from accounts import ssh_keys
from accounts.tests.test_ssh_keys import public_key

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PHONE = {"width": 390, "height": 844}


def _page_width(page) -> int:
    return page.evaluate("Math.max(document.documentElement.scrollWidth, document.body.scrollWidth)")


@pytest.mark.parametrize("language", ["zh-hans", "en"])
def test_the_first_pages_fit_a_phone_in_both_languages(browser, live_server, owner, catalog, language):
    key = ssh_keys.add_ssh_key(owner, public_key=public_key(comment="a-rather-long-comment@a-laptop.example"))
    client = Client()
    client.force_login(owner)
    session = client.cookies[settings.SESSION_COOKIE_NAME]
    context = browser.new_context(viewport=PHONE, is_mobile=True)
    context.add_cookies(
        [
            {"name": session.key, "value": session.value, "url": live_server.url},
            {"name": settings.LANGUAGE_COOKIE_NAME, "value": language, "url": live_server.url},
        ]
    )
    page = context.new_page()
    page.set_default_timeout(15_000)
    try:
        for path in ("/billing/", "/catalog/pricing/", "/console/ssh-keys/"):
            page.goto(f"{live_server.url}{path}")
            assert _page_width(page) <= PHONE["width"], (language, path, _page_width(page))
        # The alert after adding a key names its fingerprint, one long word.
        key.delete()
        page.goto(f"{live_server.url}/console/ssh-keys/")
        page.locator("#id_public_key").fill(public_key(comment="phone@example"))
        page.locator("#id_name").fill("phone")
        page.locator("form:has(#id_public_key) button[type=submit]").click()
        page.locator("#ssh-key-added").wait_for()
        assert _page_width(page) <= PHONE["width"], (language, "ssh-key alert", _page_width(page))
    finally:
        context.close()
