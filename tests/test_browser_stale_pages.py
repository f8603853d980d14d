"""In real headless Chromium: an instance page that stays open while the instance is released shows the released
state without stale controls (the polled status brings the disks panel along), and buttons in tables keep their
labels on one line on a phone and on a laptop."""

import pytest
from django.conf import settings
from django.test import Client

from accounts.services import create_api_token
from instances import lifecycle
from instances.models import Instance
from instances.tests.fixtures import settle
from storage import disks
from storage.models import CloudDisk
from tests.fixtures.factories import top_up
from tests.fixtures.services import screenshot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _log_in(page, live_server, user, language="en"):
    client = Client()
    client.force_login(user)
    cookie = client.cookies[settings.SESSION_COOKIE_NAME]
    page.context.add_cookies(
        [
            {"name": cookie.key, "value": cookie.value, "url": live_server.url},
            {"name": settings.LANGUAGE_COOKIE_NAME, "value": language, "url": live_server.url},
        ]
    )


def test_a_released_instance_page_drops_its_disk_controls_without_a_reload(page, live_server, owner, launch):
    # Given a running instance with a data disk, its page open
    top_up(owner, "1000")
    instance = launch(name="with-disk", data_disk_gb=20)
    settle()
    _log_in(page, live_server, owner)
    page.on("dialog", lambda dialog: dialog.accept())
    page.goto(f"{live_server.url}{instance.get_absolute_url()}")
    page.wait_for_selector('#instance-badge[data-status="running"]')
    page.locator("#attached-disks .detach-button").wait_for()  # the panel loads after the page
    assert page.locator("#attached-disks .detach-button").count() == 1
    assert "¥" in page.locator("#price-per-hour").inner_text()

    # When it is released from the page and the release completes while the page stays open
    page.click("#release-button")
    page.wait_for_selector('#instance-badge[data-status="releasing"]')
    settle()
    page.wait_for_selector('#instance-badge[data-status="released"]')

    # Then the disk is shown detached, with no detach, attach or mount controls, and no hourly price
    page.locator("#no-attached-disks").wait_for()
    assert page.locator("#attached-disks .detach-button").count() == 0
    assert page.locator("#attach-disk-form, #hub-search-input, .unmount-button").count() == 0
    assert page.locator("#auto-shutdown-form").count() == 0
    assert page.locator("#price-per-hour").inner_text().strip() == "—"
    disk = CloudDisk.objects.get(owner=owner)
    assert disk.status == "available" and disk.instance is None  # the disk survives the release
    assert Instance.objects.get(pk=instance.pk).status == "released"
    screenshot(page, "stale-released-instance")


def test_services_release_elsewhere_also_reaches_an_open_page(page, live_server, owner, launch):
    # The release comes from the API or the CLI while the page polls
    top_up(owner, "1000")
    instance = launch(name="api-released", data_disk_gb=20)
    settle()
    _log_in(page, live_server, owner)
    page.goto(f"{live_server.url}{instance.get_absolute_url()}")
    page.wait_for_selector('#instance-badge[data-status="running"]')
    lifecycle.release(Instance.objects.get(pk=instance.pk))
    settle()
    page.wait_for_selector('#instance-badge[data-status="released"]')
    page.locator("#no-attached-disks").wait_for()
    assert page.locator(".detach-button").count() == 0


# Counts the lines each visible element's label takes (buttons, column headings): 2 for a label that wrapped.
BUTTON_LINES = """(selector) => [...document.querySelectorAll(selector)]
  .filter((b) => b.offsetParent !== null && b.innerText.trim())
  .map((b) => {
    const range = document.createRange();
    range.selectNodeContents(b);
    const tops = new Set([...range.getClientRects()].filter((r) => r.width > 0).map((r) => Math.round(r.top)));
    return {text: b.innerText.trim(), lines: tops.size};
  })"""


@pytest.mark.parametrize("width", [390, 1366])
def test_buttons_and_headings_in_tables_keep_chinese_labels_on_one_line(browser, live_server, owner, launch, width):

    top_up(owner, "1000")
    instance = launch(name="训练任务-一号", data_disk_gb=20)
    settle()
    disks.create(owner, name="数据盘二号", size_gb=50, zone=instance.zone)
    create_api_token(owner, name="笔记本命令行", scope="read")
    context = browser.new_context(locale="zh-CN", viewport={"width": width, "height": 900}, is_mobile=width < 500)
    page = context.new_page()
    page.set_default_timeout(15_000)
    try:
        _log_in(page, live_server, owner, language="zh-hans")
        pages = [
            ("instances", "/instances/", "main .btn"),
            ("disks", "/storage/disks/", "#disk-table .btn"),
            ("tokens", "/console/tokens/", "#token-table .btn"),
            ("instance", instance.get_absolute_url(), "main .btn"),
        ]
        for name, path, selector in pages:
            page.goto(f"{live_server.url}{path}")
            buttons = page.evaluate(BUTTON_LINES, selector)
            assert buttons, path
            wrapped = [b["text"] for b in buttons if b["lines"] > 1]
            assert wrapped == [], f"{path} at {width}px: {wrapped}"
            headings = [h["text"] for h in page.evaluate(BUTTON_LINES, "main table thead th") if h["lines"] > 1]
            assert headings == [], f"{path} at {width}px: {headings}"
            page.screenshot(path=str(screenshot(page, f"buttons-{width}-{name}")), full_page=True)
    finally:
        context.close()
