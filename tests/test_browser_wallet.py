"""In real headless Chromium: a new user sees the ¥10.00 trial credit with its expiry, tops up ¥50 through the
sandbox checkout (development: no real money), and sees the transaction and the new balance."""

import pytest

from accounts import services
from tests.fixtures.factories import UserFactory
from tests.fixtures.services import screenshot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_new_user_sees_the_trial_credit_and_tops_up_50_through_the_sandbox(page, live_server):
    user = UserFactory(email="wallet-newcomer@example.com", password="Kunpeng-Ascend-910B")
    services.on_email_verified(user, user.email)  # what confirming the e-mail does

    page.goto(f"{live_server.url}/accounts/login/")
    page.fill("input[name=login]", user.email)
    page.fill("input[name=password]", "Kunpeng-Ascend-910B")
    page.locator("main form button[type=submit]").click()
    page.wait_for_url("**/console/")

    # The dashboard shows the trial credit and when it expires
    assert page.locator("#wallet-trial").inner_text() == "¥10.00"
    assert page.locator("#wallet-trial-expiry").is_visible()
    screenshot(page, "wallet-01-dashboard-trial-credit")

    # Top up ¥50 through the sandbox checkout
    page.goto(f"{live_server.url}/billing/")
    page.fill("#id_amount", "50")
    page.locator("#topup-submit").click()
    page.wait_for_url("**/billing/topup/sandbox/**")
    assert "沙箱" in page.locator("#sandbox-banner").inner_text()  # the console is in Chinese by default
    screenshot(page, "wallet-02-sandbox-checkout")
    page.locator("#sandbox-pay").click()
    page.wait_for_url("**/billing/topup/success/**")
    page.locator("#back-to-wallet").click()
    page.wait_for_url("**/billing/")

    # The new balance and the transaction
    assert page.locator("#wallet-cash").inner_text() == "¥50.00"
    assert page.locator("#wallet-balance").inner_text() == "¥60.00"
    assert "+¥50.00" in page.locator("#transactions").inner_text()
    screenshot(page, "wallet-03-topped-up")
