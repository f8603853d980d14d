"""In real headless Chromium: a search typed into a page whose scripts have not arrived yet (a slow phone, a busy
server) is searched once they have, on the hub's own page; the instance page's hub search, in a panel the scripts
load, offers no box before them."""

import pytest
from django.conf import settings
from django.test import Client

from instances.tests.fixtures import settle
from marketplace import seed as hub_catalog
from tests.fixtures.factories import top_up

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _log_in(page, live_server, user):
    client = Client()
    client.force_login(user)
    cookie = client.cookies[settings.SESSION_COOKIE_NAME]
    page.context.add_cookies(
        [
            {"name": cookie.key, "value": cookie.value, "url": live_server.url},
            {"name": settings.LANGUAGE_COOKIE_NAME, "value": "en", "url": live_server.url},
        ]
    )


def _hold_htmx(page) -> list:
    """Holds the request for htmx until the test lets it go: the page is parsed and shown, its script not run."""
    held = []
    page.route("**/htmx.min.js", lambda route: held.append(route))
    return held


# Runs before htmx reads its settings from the page (both wait for the document to be parsed; this listens first).
_SLOW_SETTLE = """document.addEventListener("DOMContentLoaded", () => {
  const meta = document.querySelector('meta[name="htmx-config"]');
  meta.content = JSON.stringify({...JSON.parse(meta.content), defaultSettleDelay: 1500});
});"""


def _type_then_let_scripts_in(page, url, box, text, held):
    page.goto(url, wait_until="commit")
    page.locator(box).wait_for()
    page.wait_for_function("() => document.readyState === 'loading'")  # the parser waits for the script
    page.fill(box, text)
    assert held, "the page asked for htmx"
    assert page.evaluate("() => typeof window.htmx") == "undefined"
    held[0].continue_()
    page.unroute("**/htmx.min.js")


def test_a_hub_search_typed_before_the_scripts_arrive_is_searched(page, live_server, owner, launch):
    hub_catalog.load()
    top_up(owner, "100")
    instance = launch(name="early-typing")
    settle()
    _log_in(page, live_server, owner)

    # The instance page's hub search is in its disks-and-mounts panel, which the scripts load after the page: it
    # says so until then, and no box takes typing that would be lost. Once shown, the box is bound by htmx when the
    # panel settles, a moment later; a longer moment here makes sure the search is typed within it, as a quick hand
    # on a slow phone can, and it is searched all the same.
    page.add_init_script(_SLOW_SETTLE)
    held = _hold_htmx(page)
    page.goto(f"{live_server.url}{instance.get_absolute_url()}", wait_until="commit")
    page.locator("#attachments[aria-busy=true]").wait_for()
    assert page.locator("#hub-search-input").count() == 0
    held[0].continue_()
    page.unroute("**/htmx.min.js")
    page.fill("#hub-search-input", "中文对话")
    page.locator('#hub-result-list [data-repo="THUDM/chatglm3-6b"]').wait_for()

    held = _hold_htmx(page)
    _type_then_let_scripts_in(page, f"{live_server.url}/marketplace/hub/", "#id_q", "对话", held)
    page.wait_for_url("**/marketplace/hub/?q=*")
    page.locator("#hub-items").get_by_role("link", name="THUDM/chatglm3-6b").wait_for()
