"""Real Stripe-signed webhook payloads, built locally (no network): ``t=…,v1=HMAC-SHA256("{t}.{payload}")``."""

import hashlib
import hmac
import json
import time

SECRET = "whsec_test_secret_for_the_webhook"


def signature(payload: str, secret: str = SECRET, timestamp: int | None = None) -> str:
    timestamp = timestamp or int(time.time())
    digest = hmac.new(secret.encode(), f"{timestamp}.{payload}".encode(), hashlib.sha256).hexdigest()
    return f"t={timestamp},v1={digest}"


def event(kind: str, obj: dict, event_id: str = "evt_test_1") -> str:
    return json.dumps({"id": event_id, "object": "event", "type": kind, "data": {"object": obj}})


def checkout_completed(checkout_id: str, amount_fen: int, payment_intent: str = "pi_test_1") -> str:
    session = {
        "id": checkout_id,
        "object": "checkout.session",
        "payment_status": "paid",
        "amount_total": amount_fen,
        "currency": "cny",
        "payment_intent": payment_intent,
    }
    return event("checkout.session.completed", session)


def deliver(client, payload: str, sig: str | None = None):
    return client.post(
        "/billing/stripe/webhook",
        data=payload,
        content_type="application/json",
        HTTP_STRIPE_SIGNATURE=sig if sig is not None else signature(payload),
    )
