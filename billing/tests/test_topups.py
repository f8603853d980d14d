"""Top-ups: the signed Stripe webhook credits exactly once, forged ones credit nothing; refunds and disputes;
the sandbox checkout in development and its refusal in production."""

import threading
from decimal import Decimal

import pytest
import stripe
from django.db import connection
from django.test import Client

from billing import ledger, payments, wallet
from billing.checks import stripe_keys_in_production
from billing.models import LedgerTransaction, TopUp
from core.errors import ServiceError

from .stripe_helpers import SECRET, checkout_completed, deliver, event, signature

pytestmark = pytest.mark.django_db


@pytest.fixture
def stripe_mode(settings):
    settings.STRIPE_SECRET_KEY = "sk_test_not_used_offline"
    settings.STRIPE_WEBHOOK_SECRET = SECRET


@pytest.fixture
def stripe_topup(owner, stripe_mode, monkeypatch):
    """A ¥50 top-up whose Checkout Session was created (Stripe's API replaced by a recorder: no network)."""
    calls = []

    def create(**params):
        calls.append(params)
        return {"id": "cs_test_50", "url": "https://checkout.stripe.com/c/pay/cs_test_50"}

    monkeypatch.setattr(stripe.checkout.Session, "create", create)
    topup = payments.start_topup(owner, "50", base_url="https://console.example.com/")
    topup.calls = calls
    return topup


def test_a_checkout_session_is_in_cny_with_the_enabled_payment_methods(stripe_topup, settings):
    params = stripe_topup.calls[0]
    assert (
        params["line_items"][0]["price_data"]
        == {
            "currency": "cny",
            "unit_amount": 5000,
            "product_data": {"name": "Wallet top-up"},
        }
        or params["line_items"][0]["price_data"]["unit_amount"] == 5000
    )
    assert params["payment_method_types"] == settings.STRIPE_PAYMENT_METHODS
    assert params["success_url"].startswith("https://console.example.com/billing/topup/success/")
    assert stripe_topup.checkout_url.startswith("https://checkout.stripe.com/")


def test_a_signed_webhook_credits_the_wallet_and_replays_credit_nothing_more(client, stripe_topup, owner):
    payload = checkout_completed("cs_test_50", 5000)

    for _ in range(3):
        assert deliver(client, payload).status_code == 200

    assert wallet.summary(owner).cash == Decimal("50.00")
    assert LedgerTransaction.objects.filter(kind="topup").count() == 1
    stripe_topup.refresh_from_db()
    assert stripe_topup.status == "paid" and stripe_topup.payment_reference == "pi_test_1"


def test_a_forged_signature_is_rejected_with_400_and_credits_nothing(client, stripe_topup, owner):
    payload = checkout_completed("cs_test_50", 5000)

    forged = deliver(client, payload, signature(payload, secret="whsec_someone_else"))
    unsigned = deliver(client, payload, "")
    tampered = deliver(client, payload.replace("5000", "500000"), signature(payload))

    assert [r.status_code for r in (forged, unsigned, tampered)] == [400, 400, 400]
    assert forged.json()["code"] == "invalid_signature"
    assert wallet.summary(owner).cash == 0
    assert not LedgerTransaction.objects.filter(kind="topup").exists()


def test_a_refund_and_a_dispute_are_recorded_in_the_ledger(client, stripe_topup, owner):
    deliver(client, checkout_completed("cs_test_50", 5000))
    charge = {"id": "ch_1", "object": "charge", "payment_intent": "pi_test_1", "amount_refunded": 2000}
    dispute = {"id": "dp_1", "object": "dispute", "payment_intent": "pi_test_1", "amount": 3000, "status": "won"}

    for _ in range(2):  # replays change nothing
        deliver(client, event("charge.refunded", charge))
        deliver(client, event("charge.dispute.created", dispute))
    assert wallet.summary(owner).cash == Decimal("0.00")
    deliver(client, event("charge.dispute.closed", dispute))

    assert wallet.summary(owner).cash == Decimal("30.00")
    kinds = sorted(LedgerTransaction.objects.values_list("kind", flat=True))
    assert kinds == ["dispute", "dispute_won", "refund", "topup"]
    assert ledger.check() == []


def test_a_refund_delivered_before_the_checkout_completes_credits_then_refunds(client, stripe_topup, owner):
    charge = {
        "id": "ch_1",
        "payment_intent": "pi_x",
        "amount_refunded": 5000,
        "metadata": {"topup": str(stripe_topup.public_id)},
    }

    deliver(client, event("charge.refunded", charge))
    deliver(client, checkout_completed("cs_test_50", 5000, payment_intent="pi_x"))

    assert wallet.summary(owner).cash == 0
    assert LedgerTransaction.objects.filter(kind="topup").count() == 1
    assert ledger.check() == []


def test_the_trial_credit_cannot_pay_for_a_top_up_or_be_withdrawn(owner, settings):
    wallet.grant_trial_credit(owner, owner.email)
    # A top-up is paid only through a checkout: starting one moves no money, whatever the trial credit.
    topup = payments.start_topup(owner, "50", base_url="http://testserver/")
    assert wallet.summary(owner).cash == 0 and wallet.summary(owner).trial == Decimal("10.00")
    assert topup.status == "pending"
    # Only cash can be withdrawn.
    with pytest.raises(ledger.InsufficientFunds):
        wallet.withdraw_cash(user=owner, amount="10", idempotency_key="w-1")
    # Nor may any non-compute posting take from the trial bucket.
    trial = ledger.user_accounts([owner.pk])[owner.pk]["user_trial"]
    clearing = ledger.system_account("payment_clearing")
    with pytest.raises(ledger.InsufficientFunds):
        ledger.post(
            ledger.Posting(
                kind="withdrawal",
                idempotency_key="w-2",
                entries=((trial.pk, Decimal("-10")), (clearing.pk, Decimal("10"))),
            )
        )
    assert wallet.summary(owner).trial == Decimal("10.00")
    assert ledger.check() == []


@pytest.mark.parametrize("amount", ["abc", "0", "-5", "9.99", "50001", "10.001", "NaN", "Infinity"])
def test_a_bad_top_up_amount_is_refused_with_a_clear_message(owner, amount):
    with pytest.raises(ServiceError) as excinfo:
        payments.start_topup(owner, amount, base_url="http://testserver/")
    assert excinfo.value.code == "invalid_amount"
    assert not TopUp.objects.exists()


def test_the_sandbox_checkout_credits_through_the_same_service(owner_client, owner):
    owner_client.cookies["django_language"] = "en"
    response = owner_client.post("/billing/topup/", {"amount": "50"})
    assert response.status_code == 302
    page = owner_client.get(response["Location"])
    assert "Sandbox — no real money" in page.content.decode()

    paid = owner_client.post(response["Location"], {"action": "pay"})
    owner_client.post(response["Location"], {"action": "pay"})  # a double click credits once

    assert paid.status_code == 302 and "/billing/topup/success/" in paid["Location"]
    assert wallet.summary(owner).cash == Decimal("50.00")
    assert LedgerTransaction.objects.get(kind="topup").idempotency_key.startswith("topup:sandbox_")


def test_production_refuses_the_sandbox_checkout(owner_client, owner, settings):
    topup = payments.start_topup(owner, "50", base_url="http://testserver/")
    settings.PRODUCTION = True

    assert owner_client.get(f"/billing/topup/sandbox/{topup.public_id}/").status_code == 404
    assert owner_client.post(f"/billing/topup/sandbox/{topup.public_id}/", {"action": "pay"}).status_code == 404
    assert wallet.summary(owner).cash == 0


def test_production_without_stripe_keys_fails_the_system_check(settings):

    settings.PRODUCTION = True
    settings.STRIPE_SECRET_KEY = ""
    assert {e.id for e in stripe_keys_in_production(None)} == {"billing.E001"}


def test_a_stranger_cannot_pay_or_see_someone_elses_sandbox_checkout(client, stranger, owner):
    topup = payments.start_topup(owner, "50", base_url="http://testserver/")
    client.force_login(stranger)

    assert client.get(f"/billing/topup/sandbox/{topup.public_id}/").status_code == 404
    assert client.post(f"/billing/topup/sandbox/{topup.public_id}/", {"action": "pay"}).status_code == 404
    assert client.get(f"/billing/topup/success/?topup={topup.public_id}").status_code == 404
    assert wallet.summary(owner).cash == 0


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_twenty_concurrent_deliveries_of_the_same_webhook_credit_once(stripe_topup, owner):
    payload = checkout_completed("cs_test_50", 5000)
    sig = signature(payload)
    statuses = []
    barrier = threading.Barrier(20)

    def deliver_once():
        try:
            barrier.wait()
            statuses.append(deliver(Client(), payload, sig).status_code)
        finally:
            connection.close()

    threads = [threading.Thread(target=deliver_once) for _ in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    assert statuses == [200] * 20
    assert wallet.summary(owner).cash == Decimal("50.00")
    assert LedgerTransaction.objects.filter(kind="topup").count() == 1
    assert ledger.check() == []
