"""In real headless Chromium, the launch wizard: Enter in its hub search searches the hub and never submits the launch
form around it (which would start a billed machine); a change made while Launch is being sent does not cancel it."""

import re

import pytest
from playwright.sync_api import expect

from instances.models import Instance, WaitingLaunch
from tests.fixtures.catalog import load_hub
from tests.fixtures.factories import top_up
from tests.fixtures.services import log_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_enter_in_the_wizards_hub_search_searches_and_launches_nothing(page, live_server, owner, catalog):
    load_hub()
    top_up(owner, "100")
    log_in(page, live_server, owner)
    page.goto(f"{live_server.url}/instances/new/")
    page.fill("#id_name", "not-launched")

    with page.expect_response(lambda response: "/marketplace/hub/search/" in response.url):
        page.fill("#wizard-hub-search", "chatglm3")
        page.press("#wizard-hub-search", "Enter")
    button = page.locator("#wizard-hub-results .add-mount-button[data-repo='THUDM/chatglm3-6b']")
    expect(button).to_be_visible()
    assert page.url.endswith("/instances/new/")
    assert not Instance.objects.filter(owner=owner).exists() and not WaitingLaunch.objects.exists()

    button.click()
    expect(page.locator("#id_mounts")).to_have_value("THUDM/chatglm3-6b")


def test_a_change_while_the_launch_is_sent_leaves_it_to_finish(page, live_server, owner, catalog):
    top_up(owner, "100")
    log_in(page, live_server, owner)
    page.goto(f"{live_server.url}/instances/new/")
    page.fill("#id_name", "sent-once")
    held = []  # the launch's request, held back until the change below was made

    def hold(route):
        if route.request.method == "POST":
            held.append(route)
        else:
            route.continue_()

    page.route(re.compile(r"/instances/new/"), hold)
    page.click("#launch-button")
    page.wait_for_function("document.querySelector('#launch-button').disabled")
    while not held:
        page.wait_for_timeout(50)
    page.select_option("#id_cards", "2")  # a change re-renders the wizard: its request must not replace the launch's
    page.wait_for_timeout(300)
    held[0].continue_()

    page.wait_for_url(re.compile(r"/instances/[0-9a-f-]{36}/$"))
    assert list(Instance.objects.filter(owner=owner).values_list("name", "cards")) == [("sent-once", 1)]
