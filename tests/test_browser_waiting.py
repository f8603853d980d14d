"""In real headless Chromium: with every card of a chip taken, the launch wizard's "Wait for a card" queues the launch
instead of refusing it (even clicked while the wizard's live price is still being worked out), the waiting page shows
its place, and "Leave the queue" takes it out."""

import pytest
from django.conf import settings
from django.db.models import F
from django.test import Client
from playwright.sync_api import expect

from catalog.models import Node
from instances.models import Instance, WaitingLaunch
from tests.fixtures.factories import top_up
from tests.fixtures.services import screenshot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _log_in(page, live_server, user):
    client = Client()
    client.force_login(user)
    cookie = client.cookies[settings.SESSION_COOKIE_NAME]
    page.context.add_cookies([{"name": cookie.key, "value": cookie.value, "url": live_server.url}])


def test_a_launch_that_waits_for_a_card_is_queued_shown_in_its_place_and_left(page, live_server, owner, catalog):
    top_up(owner, "100")
    Node.objects.filter(chip__slug="mlu370-x8").update(cards_reserved=F("cards"))  # every MLU card taken
    _log_in(page, live_server, owner)

    page.goto(f"{live_server.url}/instances/new/")
    page.select_option("#id_chip", "mlu370-x8")
    page.wait_for_selector("#id_image option[value=pytorch-2\\.2-neuware]", state="attached")
    page.fill("#id_name", "waits-for-mlu")
    # Clicked at once, while the box's change still re-renders the wizard with its live price: the launch goes.
    page.check("#id_wait_for_card")
    page.click("#launch-button")

    page.wait_for_url("**/instances/waiting/*/")
    expect(page.locator("#waiting-state")).to_have_attribute("data-state", "waiting")
    expect(page.locator("#waiting-position")).to_contain_text("1")
    screenshot(page, "instances-waiting-01-queued")
    entry = WaitingLaunch.objects.get(owner=owner)
    assert entry.name == "waits-for-mlu" and not Instance.objects.filter(name="waits-for-mlu").exists()

    page.click("#cancel-waiting")
    expect(page.locator("#waiting-state")).to_have_attribute("data-state", "left")
    entry.refresh_from_db()
    assert entry.state == WaitingLaunch.State.LEFT
