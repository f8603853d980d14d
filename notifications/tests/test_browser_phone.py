"""In real headless Chromium at a phone's 390 px: the channels page and a channel's page with its delivery log never
scroll sideways, in Chinese or in English (long robot URLs and error messages wrap or scroll inside their table)."""

import pytest
from django.conf import settings
from django.test import Client

from notifications import services
from notifications.choices import ChannelKind
from notifications.services import ChannelSpec

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PHONE = {"width": 390, "height": 844}


def _page_width(page) -> int:
    return page.evaluate("Math.max(document.documentElement.scrollWidth, document.body.scrollWidth)")


@pytest.mark.parametrize("language", ["zh-hans", "en"])
def test_the_notification_pages_fit_a_phone(browser, live_server, owner, receiver, language):
    channel = services.create_channel(
        owner,
        ChannelSpec(
            kind=ChannelKind.DINGTALK,
            name="钉钉值班群-" + "长" * 30,
            url=receiver.url("/robot/send?access_token=" + "a" * 64),
        ),
    )
    receiver.status = 500
    receiver.reply = b'{"errcode":310000,"errmsg":"' + b"keywords-not-in-content-" * 10 + b'"}'
    services.send_test(owner, channel.public_id)
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
        for path in ("/notifications/", f"/notifications/channels/{channel.public_id}/"):
            page.goto(f"{live_server.url}{path}")
            assert _page_width(page) <= PHONE["width"], (language, path, _page_width(page))
        page.locator("#send-test").click()
        page.locator("#test-result").wait_for()
        assert _page_width(page) <= PHONE["width"], (language, "test result", _page_width(page))
    finally:
        context.close()
