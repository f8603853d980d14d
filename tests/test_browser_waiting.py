"""In real headless Chromium: with every card of a chip taken, the launch wizard's "Wait for a card" queues the launch
instead of refusing it, the waiting page shows its place, and "Leave the queue" takes it out."""

import pytest
from django.db.models import F
from playwright.sync_api import expect

from catalog.models import Node
from instances.models import Instance, WaitingLaunch
from tests.fixtures.factories import top_up
from tests.fixtures.services import log_in, screenshot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_launch_that_waits_for_a_card_is_queued_shown_in_its_place_and_left(page, live_server, owner, catalog):
    top_up(owner, "100")
    Node.objects.filter(chip__slug="mlu370-x8").update(cards_reserved=F("cards"))  # every MLU card taken
    log_in(page, live_server, owner)

    page.goto(f"{live_server.url}/instances/new/")
    page.select_option("#id_chip", "mlu370-x8")
    page.wait_for_selector("#id_image option[value=pytorch-2\\.2-neuware]", state="attached")
    page.fill("#id_name", "waits-for-mlu")
    # Each change re-renders the wizard with its live price (htmx swaps the whole form): click on the one with the
    # box ticked, as a click landing during the swap would hit a button being replaced.
    with page.expect_response(lambda response: "wait_for_card=on" in response.url):
        page.check("#id_wait_for_card")
    expect(page.locator("#id_wait_for_card")).to_be_checked()
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
