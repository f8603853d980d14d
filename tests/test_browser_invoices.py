"""Fapiao in real headless Chromium: a user tops up ¥100 through the sandbox checkout, spends some, asks for a ¥100
general invoice and is told what may be invoiced, asks for that; finance issues it in the back office with the
number and the PDF; the user downloads the PDF."""

from decimal import Decimal

import pytest
from django.contrib.auth.models import Group

from accounts import services
from accounts.ops.roles import FINANCE, sync_groups
from billing import invoices, wallet
from billing.models import Invoice
from tests.fixtures.factories import UserFactory
from tests.fixtures.services import screenshot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
PDF = b"%PDF-1.4\n1 0 obj<<>>endobj\ntrailer<<>>\n%%EOF\n"


def _log_in(page, live_server, email, password):
    page.context.clear_cookies()
    page.context.add_cookies([{"name": "django_language", "value": "en", "url": live_server.url}])
    page.goto(f"{live_server.url}/accounts/login/")
    page.fill("input[name=login]", email)
    page.fill("input[name=password]", password)
    page.locator("main form button[type=submit]").click()


def test_a_customer_gets_a_fapiao_for_what_they_paid(page, live_server, cloud_storage, tmp_path):
    user = UserFactory(email="lab@example.com", password="Kunpeng-Ascend-910B")
    services.on_email_verified(user, user.email)
    _log_in(page, live_server, user.email, "Kunpeng-Ascend-910B")
    page.wait_for_url("**/console/")

    # Top up ¥100 through the sandbox checkout, then spend ¥20 of it (the spend stays invoiceable: it was paid).
    page.goto(f"{live_server.url}/billing/")
    page.fill("#id_amount", "100")
    page.locator("#topup-submit").click()
    page.wait_for_url("**/billing/topup/sandbox/**")
    page.locator("#sandbox-pay").click()
    page.wait_for_url("**/billing/topup/success/**")
    wallet.adjust_balance(
        user=user, amount=Decimal("-20"), reason="usage in this test", staff=None, idempotency_key="spend"
    )

    # Asking for more than was paid is refused with what may be invoiced; then the right amount.
    page.goto(f"{live_server.url}/billing/")
    page.locator("#invoices-link").click()
    page.wait_for_url("**/billing/invoices/")
    assert "¥100.00" in page.locator("#invoiceable").inner_text()
    page.fill("#id_title", "北京昆鹏智能科技有限公司")
    page.fill("#id_tax_id", "91110108MA01ABCD1X")
    page.fill("#id_amount", "120")
    page.locator("#invoice-submit").click()
    assert "at most ¥100.00" in page.locator("#invoice-form").inner_text()
    page.fill("#id_amount", "100")
    page.locator("#invoice-submit").click()
    page.wait_for_url("**/billing/invoices/")
    assert "Requested" in page.locator("#invoice-list").inner_text()
    screenshot(page, "invoice-01-requested")
    invoice = Invoice.objects.get(user=user)

    # Finance issues it in the back office: the number and the PDF the tax system returned.
    finance = UserFactory(email="finance@example.com", password="Finance-Pass-2026", is_staff=True)
    sync_groups()
    finance.groups.add(Group.objects.get(name=FINANCE))
    _log_in(page, live_server, finance.email, "Finance-Pass-2026")
    page.wait_for_load_state()
    page.goto(f"{live_server.url}/ops/invoices/")
    row = page.locator(f"#invoice-{invoice.public_id}")
    row.locator("input[name=number]").fill("24110000000012345678")
    pdf = tmp_path / "fapiao.pdf"
    pdf.write_bytes(PDF)
    row.locator("input[name=pdf]").set_input_files(str(pdf))
    row.locator(".invoice-issue-form button").click()
    page.wait_for_url("**/ops/invoices/")
    assert "24110000000012345678" in page.locator("#invoice-decided").inner_text()

    # The customer downloads it.
    _log_in(page, live_server, user.email, "Kunpeng-Ascend-910B")
    page.wait_for_url("**/console/")
    page.goto(f"{live_server.url}/billing/invoices/")
    with page.expect_download() as download:
        page.locator(f'[data-invoice="{invoice.public_id}"] .invoice-pdf').click()
    saved = tmp_path / "downloaded.pdf"
    download.value.save_as(saved)
    assert saved.read_bytes() == PDF
    assert invoices.invoiceable(user) == 0
    screenshot(page, "invoice-02-issued")
