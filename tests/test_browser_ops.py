"""In real headless Chromium, the back office: a finance user adjusts a balance with a reason and the user sees it
in their transactions; an ops user approves an enterprise verification (the applicant sees the approval) and a
community image, which then appears in the marketplace."""

import pytest

from accounts import verification
from backoffice.tests.fixtures import PASSWORD
from marketplace.images import catalog as images_catalog
from marketplace.images import services as image_services
from marketplace.models import Image
from tests.fixtures.factories import UserFactory
from tests.fixtures.services import screenshot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def login(page, live_server, user):
    page.context.clear_cookies()
    page.goto(f"{live_server.url}/accounts/login/")
    page.fill("input[name=login]", user.email)
    page.fill("input[name=password]", PASSWORD)
    page.locator("main form button[type=submit]").click()
    page.wait_for_url("**/console/")


def test_a_finance_user_adjusts_a_balance_and_the_user_sees_it_in_their_transactions(page, live_server, finance_user):
    customer = UserFactory(email="customer@example.com")

    login(page, live_server, finance_user)
    page.goto(f"{live_server.url}/ops/users/?q=customer")
    page.locator("#user-table a", has_text="customer@example.com").click()
    page.wait_for_url(f"**/ops/users/{customer.public_id}/")
    page.fill("#id_amount", "25")
    page.fill("#id_reason", "Compensation for the 3 May outage")
    screenshot(page, "ops-01-adjust-balance")
    page.locator("#adjust-submit").click()
    page.wait_for_url(f"**/ops/users/{customer.public_id}/")
    assert page.locator("#user-cash").inner_text() == "¥25.00"
    assert "Compensation for the 3 May outage" in page.locator("#user-transactions").inner_text()

    page.goto(f"{live_server.url}/ops/audit/")
    assert "customer@example.com" in page.locator("#audit-table").inner_text()
    screenshot(page, "ops-02-audit-log")

    login(page, live_server, customer)
    page.goto(f"{live_server.url}/billing/")
    assert "+¥25.00" in page.locator("#transactions").inner_text()
    assert page.locator("#wallet-cash").inner_text() == "¥25.00"
    screenshot(page, "ops-03-user-sees-adjustment")


def test_an_ops_user_approves_an_enterprise_verification_and_the_applicant_sees_it(page, live_server, ops_user):
    applicant = UserFactory(email="cto@kunpeng-ai.example")
    verification.apply(
        applicant,
        company_name="Kunpeng AI Ltd",
        licence_number="91350100M000100Y43",
        contact_name="Li Lei",
        contact_phone="13800138000",
    )

    login(page, live_server, ops_user)
    page.goto(f"{live_server.url}/ops/reviews/")
    row = page.locator("#verification-queue tr", has_text="Kunpeng AI Ltd")
    screenshot(page, "ops-04-verification-queue")
    row.locator("button[value=approve]").click()
    page.wait_for_url("**/ops/reviews/")
    assert "Kunpeng AI Ltd" not in page.locator("#verification-queue").inner_text()
    assert "Kunpeng AI Ltd" in page.locator("#verification-decided").inner_text()

    login(page, live_server, applicant)
    page.goto(f"{live_server.url}/console/enterprise/")
    assert page.locator("#verification-badge").get_attribute("class").endswith("text-bg-success")
    assert not page.locator("#verification-form").count()
    screenshot(page, "ops-05-applicant-verified")


def test_an_ops_user_approves_a_community_image_and_it_appears_in_the_marketplace(page, live_server, ops_user):

    images_catalog.load()
    author = UserFactory(email="author@example.com")
    official = Image.objects.filter(owner__isnull=True).order_by("pk").first()
    image = image_services.publish(author, image_services.clone_to_mine(author, official, name="Bank anti-fraud MLU"))

    page.goto(f"{live_server.url}/marketplace/")  # as a visitor: not listed yet
    assert "Bank anti-fraud MLU" not in page.locator("main").inner_text()
    login(page, live_server, ops_user)
    page.goto(f"{live_server.url}/ops/reviews/")
    page.locator(f"#image-{image.public_id} button[value=approve]").click()
    page.wait_for_url("**/ops/reviews/")
    screenshot(page, "ops-06-image-approved")

    page.context.clear_cookies()
    page.goto(f"{live_server.url}/marketplace/")  # as a visitor again: listed now
    assert "Bank anti-fraud MLU" in page.locator("main").inner_text()
    screenshot(page, "ops-07-image-in-marketplace")
