"""In real headless Chromium: an instance page that stays open while the instance is released shows the released
state without stale controls (the polled status brings the disks panel along), and buttons in tables keep their
labels on one line on a phone and on a laptop."""

import pytest
from django.conf import settings
from django.test import Client

from instances import services
from instances.models import Instance
from instances.tests.fixtures import settle
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
    services.release(Instance.objects.get(pk=instance.pk))
    settle()
    page.wait_for_selector('#instance-badge[data-status="released"]')
    page.locator("#no-attached-disks").wait_for()
    assert page.locator(".detach-button").count() == 0
