"""In real headless Chromium: sign up, verify by e-mail, log in, see the console in Chinese, switch to English."""

import re

import pytest
from django.core import mail

from tests.fixtures.services import screenshot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_newcomer_signs_up_verifies_logs_in_and_switches_language(page, live_server):
    # Sign up
    page.goto(f"{live_server.url}/")
    page.get_by_role("link", name="注册即送 ¥10 体验金").first.click()
    page.fill("input[name=email]", "newcomer@example.com")
    page.fill("input[name=password1]", "Kunpeng-Ascend-910B")
    page.fill("input[name=password2]", "Kunpeng-Ascend-910B")
    page.get_by_role("button", name="注册").click()
    page.wait_for_url("**/accounts/confirm-email/")
    screenshot(page, "accounts-01-verification-sent")

    # Verify from the e-mail
    assert len(mail.outbox) == 1 and mail.outbox[0].to == ["newcomer@example.com"]
    link = re.search(r"/accounts/confirm-email/\S+/", mail.outbox[0].body).group(0)
    page.goto(f"{live_server.url}{link}")
    page.get_by_role("button", name="确认").click()

    # Log in
    page.wait_for_url("**/accounts/login/")
    page.fill("input[name=login]", "newcomer@example.com")
    page.fill("input[name=password]", "Kunpeng-Ascend-910B")
    page.locator("main form button[type=submit]").click()
    page.wait_for_url("**/console/")

    # The dashboard is in Chinese
    assert page.locator("html").get_attribute("lang") == "zh-hans"
    assert page.get_by_role("heading", name="控制台").is_visible()
    screenshot(page, "accounts-02-dashboard-zh")

    # Switch to English
    page.locator("#language-switch button[value=en]").click()
    page.wait_for_load_state()
    assert page.locator("html").get_attribute("lang") == "en"
    assert page.get_by_role("heading", name="Dashboard").is_visible()
    screenshot(page, "accounts-03-dashboard-en")
