"""Fapiao: what may be invoiced (paid cash, less refunds and what is invoiced; never the trial credit or a
subsidy), requests refused past it, finance issuing with the number and the PDF or rejecting with a reason, the
customer's download; the API; a team's invoices for its billing roles; bad input as clear errors."""

import csv
import io
from decimal import Decimal

import pytest
from django.contrib.auth.models import Group
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db.models import Sum
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from accounts.ops.audit import Actor
from accounts.ops.models import AuditEntry
from accounts.ops.roles import FINANCE, sync_groups
from billing import invoices, payments, wallet
from billing.checks import einvoice_provider_importable
from billing.choices import TransactionKind
from billing.einvoice import ProviderError
from billing.models import Invoice, LedgerTransaction, TopUp
from core.errors import ServiceError
from tests.fixtures.factories import UserFactory
from tests.fixtures.personas import _token_client

pytestmark = pytest.mark.django_db
PDF = b"%PDF-1.4\n1 0 obj<<>>endobj\ntrailer<<>>\n%%EOF\n"


def _paid(user, amount="100"):
    topup = payments.start_topup(user, Decimal(amount), base_url="http://testserver")
    payments.pay_sandbox(user, topup.public_id)


def _browser(user) -> Client:
    client = Client()
    client.cookies["django_language"] = "en"
    client.force_login(user)
    return client


def test_only_paid_cash_is_invoiceable_and_a_request_past_it_says_how_much_is(owner, cloud_storage):
    wallet.adjust_balance(user=owner, amount=Decimal("30"), reason="goodwill", staff=None, idempotency_key="adj-1")
    assert invoices.invoiceable(owner) == 0  # an adjustment (or the trial credit) is not paid money
    _paid(owner, "100")
    assert invoices.invoiceable(owner) == Decimal("100.00")

    page = _browser(owner)
    too_much = page.post(reverse("billing:invoices"), {"kind": "general", "title": "李雷", "amount": "130"})
    assert too_much.status_code == 409 and "at most ¥100.00" in too_much.content.decode()
    assert not Invoice.objects.exists()
    ok = page.post(reverse("billing:invoices"), {"kind": "general", "title": "李雷", "amount": "60.50"})
    assert ok.status_code == 302
    assert invoices.invoiceable(owner) == Decimal("39.50")
    listed = page.get(reverse("billing:invoices")).content.decode()
    assert "¥39.50" in listed and "李雷" in listed


@pytest.mark.parametrize(
    ("fields", "code"),
    [
        ({"amount": "-5"}, "invalid_amount"),
        ({"amount": "1.005"}, "invalid_amount"),
        ({"amount": "NaN"}, "invalid_amount"),
        ({"amount": "abc"}, "invalid_amount"),
        ({"title": "  "}, "title_required"),
        ({"tax_id": "12-34"}, "invalid_tax_id"),
        ({"kind": "golden"}, "invalid_kind"),
        ({"kind": "special"}, "enterprise_required"),
    ],
)
def test_bad_requests_are_refused_with_what_is_wrong_and_nothing_is_made(owner, fields, code):
    _paid(owner)
    with pytest.raises(ServiceError) as refused:
        invoices.request(owner, **({"kind": "general", "title": "Kunpeng AI", "amount": "10"} | fields))
    assert refused.value.code == code
    assert not Invoice.objects.exists()


def test_finance_issues_with_the_pdf_and_the_customer_downloads_it_others_cannot(owner, cloud_storage):
    _paid(owner)
    invoice = invoices.request(owner, kind="general", title="Kunpeng AI", tax_id="91110108MA01ABCD1X", amount="80")
    finance = UserFactory(email="finance@example.com", is_staff=True)

    sync_groups()
    finance.groups.add(Group.objects.get(name=FINANCE))
    office = _browser(finance)
    assert invoice.title in office.get(reverse("ops:invoices")).content.decode()
    issue_url = reverse("ops:invoice-issue", args=[invoice.public_id])
    not_pdf = office.post(issue_url, {"number": "24110000000012345678", "pdf": SimpleUploadedFile("x.pdf", b"<html>")})
    assert not_pdf.status_code == 302 and Invoice.objects.get(pk=invoice.pk).status == "requested"
    issued = office.post(issue_url, {"number": "24110000000012345678", "pdf": SimpleUploadedFile("f.pdf", PDF)})
    assert issued.status_code == 302
    invoice.refresh_from_db()
    assert invoice.status == "issued" and invoice.number == "24110000000012345678"
    assert AuditEntry.objects.filter(action="invoice_issued", target_id=str(invoice.public_id)).exists()

    download = _browser(owner).get(reverse("billing:invoice-pdf", args=[invoice.public_id]))
    assert download.status_code == 200 and b"".join(download.streaming_content) == PDF
    api = _token_client(owner).get(f"/api/v1/invoices/{invoice.public_id}/pdf")
    assert api.status_code == 200
    stranger = UserFactory(email="stranger@example.com")
    assert _browser(stranger).get(reverse("billing:invoice-pdf", args=[invoice.public_id])).status_code == 404
    assert _token_client(stranger).get(f"/api/v1/invoices/{invoice.public_id}/pdf").status_code == 404
    # Not for staff without the finance role.
    plain = UserFactory(email="plain@example.com", is_staff=True)
    assert _browser(plain).get(reverse("ops:invoices")).status_code == 403


def test_a_rejected_request_gives_its_amount_back_and_says_why(owner):
    _paid(owner)
    invoice = invoices.request(owner, kind="general", title="李雷", amount="100")
    assert invoices.invoiceable(owner) == 0
    staff = UserFactory(email="finance@example.com", is_staff=True)
    with pytest.raises(ServiceError):
        invoices.reject(Actor(staff), invoice.public_id, reason="")
    invoices.reject(Actor(staff), invoice.public_id, reason="抬头与实名不符")
    assert invoices.invoiceable(owner) == Decimal("100.00")
    assert "抬头与实名不符" in _browser(owner).get(reverse("billing:invoices")).content.decode()
    with pytest.raises(ServiceError) as again:
        invoices.issue(
            Actor(staff), invoice.public_id, number="24110000000012345678", pdf=SimpleUploadedFile("f.pdf", PDF)
        )
    assert again.value.code == "already_reviewed"


def test_the_api_lists_and_requests_with_the_invoiceable_amount(owner):
    _paid(owner, "50")
    api = _token_client(owner)
    api.credentials(HTTP_AUTHORIZATION=api._credentials["HTTP_AUTHORIZATION"], HTTP_ACCEPT_LANGUAGE="en")
    assert api.get("/api/v1/invoices").json()["invoiceable"] == "50.00"
    refused = api.post("/api/v1/invoices", {"title": "Kunpeng AI", "amount": "60"}, format="json")
    assert refused.status_code == 409 and refused.json()["code"] == "over_invoiceable"
    made = api.post("/api/v1/invoices", {"title": "Kunpeng AI", "amount": "50"}, format="json")
    assert made.status_code == 201 and made.json()["status"] == "requested"
    assert api.get("/api/v1/invoices").json()["invoiceable"] == "0.00"
    garbage = api.post("/api/v1/invoices", {"title": ["x"], "amount": {"a": 1}}, format="json")
    assert garbage.status_code == 400


def test_a_refund_after_invoicing_asks_for_a_red_letter_reversal_and_the_reconciliation_equals_the_ledger(
    owner, cloud_storage
):

    _paid(owner, "100")
    _paid(UserFactory(email="=cmd|' /C calc'!A0@example.com"), "30")  # a formula-looking address stays text
    staff = UserFactory(email="finance@example.com", is_staff=True)
    invoice = invoices.request(owner, kind="general", title="李雷", amount="100")
    invoices.issue(Actor(staff), invoice.public_id, number="24110000000012345678", pdf=SimpleUploadedFile("f.pdf", PDF))
    # Stripe refunds ¥40 of the top-up after the invoice was issued.
    topup = TopUp.objects.filter(user=owner).get()
    payments._claw_back(topup, Decimal("40.00"), TransactionKind.REFUND, "refund:test:40", "ch_test")
    assert invoices.over_invoiced(owner) == Decimal("40.00")
    assert [(u, e) for u, e in invoices.due_reversals()] == [(owner, Decimal("40.00"))]

    with pytest.raises(ServiceError):
        invoices.reverse(Actor(staff), invoice.public_id, number="x", reason="refund")
    invoices.reverse(Actor(staff), invoice.public_id, number="24110000000087654321", reason="退款 ¥40")
    assert Invoice.objects.get(pk=invoice.pk).status == "reversed"
    assert invoices.over_invoiced(owner) == 0 and invoices.invoiceable(owner) == Decimal("60.00")
    assert AuditEntry.objects.filter(action="invoice_reversed").count() == 1

    month = timezone.localdate().replace(day=1)
    out = io.StringIO()
    invoices.reconciliation_csv(month, out)
    rows = list(csv.reader(io.StringIO(out.getvalue())))
    body = {row[0]: row[1:] for row in rows[1:-1]}
    assert body[owner.email] == ["100.00", "40.00", "0.00", "60.00"]  # issued and reversed in the month
    assert all(not cell.startswith(("=", "+", "-", "@")) for row in rows for cell in row)
    ledger = LedgerTransaction.objects.filter(kind__in=invoices.PAID_KINDS).aggregate(t=Sum("user_amount"))["t"]
    total = rows[-1]
    assert Decimal(total[1]) - Decimal(total[2]) == ledger  # paid less refunded is the ledger's


def test_money_given_back_before_issuing_is_not_invoiced_and_odd_input_is_refused(owner, cloud_storage):

    _paid(owner, "100")
    request = invoices.request(owner, kind="general", title="李雷", amount="100")
    topup = TopUp.objects.get(user=owner)
    payments._claw_back(topup, Decimal("100.00"), TransactionKind.REFUND, "refund:test:100", "ch_test")
    finance = UserFactory(email="finance@example.com", is_staff=True)
    with pytest.raises(ServiceError) as refused:
        invoices.issue(
            Actor(finance), request.public_id, number="24110000000012345678", pdf=SimpleUploadedFile("f.pdf", PDF)
        )
    assert refused.value.code == "over_invoiceable"
    assert Invoice.objects.get(pk=request.pk).status == "requested"

    # A withdrawal is money given back too; finance does not issue its own invoice.
    _paid(finance, "50")
    wallet.withdraw_cash(user=finance, amount="20", idempotency_key="w-1", staff=None)
    assert invoices.invoiceable(finance) == Decimal("30.00")
    own = invoices.request(finance, kind="general", title="Me", amount="30")
    with pytest.raises(ServiceError) as mine:
        invoices.issue(
            Actor(finance), own.public_id, number="24110000000099999999", pdf=SimpleUploadedFile("f.pdf", PDF)
        )
    assert mine.value.code == "own_invoice"

    for amount in ("1E+99", "1e2", "١٠٠", "0.50"):
        with pytest.raises(ServiceError) as odd:
            invoices.request(owner, kind="general", title="李雷", amount=amount)
        assert odd.value.code == "invalid_amount"
    page = _browser(owner).post(
        reverse("billing:invoices"),
        {"kind": "special", "title": "x", "amount": "1", "bank_account": "6" * 60, "tax_id": "91110108MA01ABCD1X"},
    )
    assert page.status_code in {400, 402, 403}  # refused with a message (not a verified enterprise), never a 500


def test_finance_issues_through_the_e_invoice_service_and_the_customer_downloads_its_pdf(
    owner, cloud_storage, finance_user, settings
):
    settings.EINVOICE_PROVIDER = "billing.einvoice.SimulatedProvider"
    _paid(owner, "80")
    invoice = invoices.request(owner, kind="general", title="李雷", amount="80")
    staff = _browser(finance_user)
    listed = staff.get("/ops/invoices/").content.decode()
    assert "Issue through Simulated e-invoice service" in listed
    assert staff.post(f"/ops/invoices/{invoice.public_id}/issue-through-provider/").status_code == 302
    invoice.refresh_from_db()
    assert invoice.status == "issued" and invoice.number.startswith("SIM-")
    assert AuditEntry.objects.filter(action="invoice_issued", actor=finance_user).exists()
    pdf = b"".join(_browser(owner).get(f"/billing/invoices/{invoice.public_id}/pdf/").streaming_content)
    assert pdf.startswith(b"%PDF-") and b"SIMULATED FAPIAO" in pdf

    # A service that refuses: the request stays waiting and finance sees why.
    settings.EINVOICE_PROVIDER = "billing.tests.test_invoices.RefusingProvider"
    _paid(owner, "20")
    waiting = invoices.request(owner, kind="general", title="李雷", amount="20")
    staff.post(f"/ops/invoices/{waiting.public_id}/issue-through-provider/")
    waiting.refresh_from_db()
    assert waiting.status == "requested"
    assert "the tax ID is not registered" in staff.get("/ops/invoices/").content.decode()


class RefusingProvider:
    label = "Tax service"

    def issue(self, invoice):

        raise ProviderError("the tax ID is not registered")


def test_a_misspelt_e_invoice_service_stops_the_console_at_its_checks(settings):

    settings.EINVOICE_PROVIDER = "billing.einvoice.SimulatedProvider"
    assert einvoice_provider_importable(None) == []
    settings.EINVOICE_PROVIDER = "billing.einvoce.SimulatedProvider"
    assert [e.id for e in einvoice_provider_importable(None)] == ["billing.E004"]
