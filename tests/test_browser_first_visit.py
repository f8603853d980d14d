"""In real headless Chromium: what a first visit needs to work — the hub's language filter, the console on a phone,
finding the inference pages, and setting auto-shutdown in the launch wizard."""

from decimal import Decimal

import pytest
from django.conf import settings
from django.test import Client

from billing import wallet
from marketplace import seed as hub_catalog
from marketplace.models import HubItem
from tests.fixtures.services import screenshot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# Every console section, with the heading its page shows in Chinese (the default) and in English.
CONSOLE_SECTIONS = [
    ("/console/", "控制台", "Dashboard"),
    ("/instances/", "实例", "Instances"),
    ("/endpoints/", "推理服务", "Inference endpoints"),
    ("/marketplace/inference/", "推理模板", "Inference templates"),
    ("/marketplace/", "镜像市场", "Image marketplace"),
    ("/marketplace/hub/", "模型与数据集", "Models and datasets"),
    ("/storage/", "云存储", "Cloud storage"),
    ("/billing/", "钱包", "Wallet"),
]


def _log_in(page, live_server, user, language=None):
    client = Client()
    client.force_login(user)
    cookie = client.cookies[settings.SESSION_COOKIE_NAME]
    cookies = [{"name": cookie.key, "value": cookie.value, "url": live_server.url}]
    if language:
        cookies.append({"name": settings.LANGUAGE_COOKIE_NAME, "value": language, "url": live_server.url})
    page.context.add_cookies(cookies)


def _shown_repos(page) -> set[str]:
    return set(page.locator("#hub-items .hub-item a.fw-semibold").all_inner_texts())


def test_the_hub_language_filter_shows_names_filters_and_keeps_searches_working(page, live_server, owner, catalog):
    hub_catalog.load()
    _log_in(page, live_server, owner, language="en")
    failed = []

    def record(response):
        if response.status >= 400 and "/marketplace/hub/" in response.url:
            failed.append(f"{response.status} {response.url}")

    page.on("response", record)

    page.goto(f"{live_server.url}/marketplace/hub/")
    labels = page.locator("#id_language option").all_inner_texts()
    assert labels[:4] == ["Any language", "Chinese", "English", "Multilingual"], labels
    before = _shown_repos(page)

    # Choosing a language narrows the results to the items whose card names that language
    page.select_option("#id_language", label="Multilingual")
    page.wait_for_url("**language=multilingual*")
    page.locator("#hub-items").get_by_role("link", name="wikimedia/wikipedia").wait_for()
    multilingual = {i.repo for i in HubItem.objects.all() if "multilingual" in i.languages}
    assert _shown_repos(page) == multilingual != before
    screenshot(page, "first-visit-hub-language")

    # A search typed afterwards keeps the filter and answers
    page.fill("#id_q", "whisper")
    page.wait_for_url("**q=whisper*")
    page.locator("#hub-items").get_by_role("link", name="openai/whisper-large-v3").wait_for()
    assert _shown_repos(page) == {"openai/whisper-large-v3"}
    assert "language=multilingual" in page.url
    assert failed == []

    # In Chinese the options are Chinese names
    page.context.add_cookies([{"name": settings.LANGUAGE_COOKIE_NAME, "value": "zh-hans", "url": live_server.url}])
    page.goto(f"{live_server.url}/marketplace/hub/")
    assert page.locator("#id_language option").all_inner_texts()[:4] == ["任意语言", "中文", "英文", "多语言"]


def _open_phone_menu(page):
    if not page.locator("#topnav.show").count():
        page.locator(".navbar-toggler").click()
    page.locator("#topnav.collapse.show").wait_for()  # opened, not still sliding open
    menu = page.locator("#phone-console-nav")
    menu.wait_for(state="visible")
    return menu


def test_on_a_phone_the_menu_reaches_every_console_section(browser, live_server, owner, inference_catalog):
    context = browser.new_context(locale="zh-CN", viewport={"width": 390, "height": 844}, is_mobile=True)
    page = context.new_page()
    page.set_default_timeout(15_000)
    try:
        _log_in(page, live_server, owner)
        page.goto(f"{live_server.url}/console/")
        assert not page.locator("nav.sidebar").is_visible()  # below the breakpoint the sidebar is hidden…
        menu = _open_phone_menu(page)  # …and the menu offers the console instead
        page.screenshot(path=str(screenshot(page, "first-visit-phone-menu")))  # the viewport, as a phone shows it
        for path, heading, _english in CONSOLE_SECTIONS:
            menu = _open_phone_menu(page)
            with page.expect_navigation() as navigation:
                menu.locator(f'a[href="{path}"]').click()
            assert navigation.value.status == 200, path
            assert page.locator("main h1").first.inner_text().strip() == heading, path

        # In English too
        page.context.add_cookies([{"name": settings.LANGUAGE_COOKIE_NAME, "value": "en", "url": live_server.url}])
        page.goto(f"{live_server.url}/console/")
        menu = _open_phone_menu(page)
        assert "Inference endpoints" in menu.inner_text()
        for path, _chinese, heading in CONSOLE_SECTIONS:
            menu = _open_phone_menu(page)
            with page.expect_navigation() as navigation:
                menu.locator(f'a[href="{path}"]').click()
            assert navigation.value.status == 200, path
            assert page.locator("main h1").first.inner_text().strip() == heading, path
        screenshot(page, "first-visit-phone-wallet-en")
    finally:
        context.close()


def test_the_sidebar_leads_to_the_inference_endpoints_and_templates(page, live_server, owner, inference_catalog):
    _log_in(page, live_server, owner, language="en")
    page.goto(f"{live_server.url}/console/")
    sidebar = page.locator("nav.sidebar")
    sidebar.get_by_role("link", name="Inference endpoints").click()
    page.wait_for_url("**/endpoints/")
    assert page.locator("main h1").first.inner_text() == "Inference endpoints"
    sidebar.get_by_role("link", name="Inference templates").click()
    page.wait_for_url("**/marketplace/inference/")
    assert page.locator("main h1").first.inner_text() == "Inference templates"
    assert page.locator('nav.sidebar a[aria-current="page"]').inner_text().strip() == "Inference templates"


def test_launch_with_an_idle_shutdown_and_see_it_on_the_instance_page(page, live_server, owner, catalog):
    wallet.adjust_balance(user=owner, amount=Decimal("100"), reason="browser test", staff=None, idempotency_key="fv")
    _log_in(page, live_server, owner, language="en")
    page.goto(f"{live_server.url}/instances/new/")
    page.select_option("#id_chip", "mlu370-x8")
    page.wait_for_selector("#id_image option[value=pytorch-2\\.2-neuware]", state="attached")
    page.fill("#id_name", "idle-30")
    # A time in the past is refused in the form, next to the field
    page.fill("#id_auto_shutdown_at", "2020-01-01T08:00")
    page.fill("#id_idle_shutdown_minutes", "30")
    page.click("#launch-button")
    error = page.locator("#id_auto_shutdown_at ~ .invalid-feedback")
    error.wait_for()
    assert "future" in error.inner_text()
    assert page.locator("#id_idle_shutdown_minutes").input_value() == "30"
    page.fill("#id_auto_shutdown_at", "")
    page.click("#launch-button")
    page.wait_for_url("**/instances/*-*/")
    assert "30 idle minutes" in page.locator("#auto-shutdown").inner_text()
    screenshot(page, "first-visit-idle-shutdown")
