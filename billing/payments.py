"""Top-ups: Stripe Checkout in CNY, the signed webhook that credits cash exactly once, refunds and disputes.

Cash is credited only by :func:`credit_topup`, reached from the verified webhook (or, in development without
Stripe keys, from the sandbox checkout page). Its idempotency key is the checkout session's id, and the top-up
row is locked first, so any number of deliveries of the same event — concurrent or in any order — credit once.
"""

import json
import logging
import uuid
from decimal import Decimal

import stripe
from django.conf import settings
from django.core.cache import cache
from django.db import transaction
from django.db.models import Sum
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import gettext as _

from accounts import identity
from core.errors import NotFound, ServiceError, Unavailable

from . import arrears
from .choices import AccountKind, PaymentProvider, TopUpStatus, TransactionKind
from .ledger import Posting, lock_accounts, post, system_account, user_accounts
from .models import LedgerTransaction, TopUp
from .money import CENT, summed
from .wallet import parse_amount

log = logging.getLogger(__name__)

FEN = Decimal(100)


class InvalidSignature(ServiceError):
    code = "invalid_signature"


def sandbox_enabled() -> bool:
    """The sandbox checkout stands in for Stripe in development only, when no Stripe key is configured."""
    return not settings.PRODUCTION and not settings.STRIPE_SECRET_KEY


def limits() -> tuple[Decimal, Decimal]:
    return Decimal(settings.TOPUP_MIN_CNY), Decimal(settings.TOPUP_MAX_CNY)


class TooManyTopUps(ServiceError):
    status = 429
    code = "rate_limited"


_PERIODS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def check_rate(user) -> None:
    """At most ``TOPUP_RATE_LIMIT`` (e.g. "10/h") checkouts per user and window, counted in the shared cache."""
    count, _sep, period = settings.TOPUP_RATE_LIMIT.partition("/")
    window = _PERIODS.get(period.strip()[-1:] or "h", 3600)
    key = f"topup-rate:{user.pk}:{int(timezone.now().timestamp()) // window}"
    cache.add(key, 0, timeout=window)
    if cache.incr(key) > int(count):
        raise TooManyTopUps(_("Too many top-ups started. Please wait a while and try again."))


def check_amount(value) -> Decimal:
    amount = parse_amount(value)
    low, high = limits()
    if not low <= amount <= high:
        raise ServiceError(
            _("A top-up must be between ¥%(min)s and ¥%(max)s.") % {"min": low, "max": high}, code="invalid_amount"
        )
    return amount


def start_topup(user, amount, *, base_url: str, by=None) -> TopUp:
    """Create a checkout for ``amount`` CNY into ``user``'s wallet (a person's, or a team's account); ``by`` pays
    on ``topup.checkout_url`` (the user when omitted): their identity and their rate are the ones checked. Nothing
    is credited yet."""
    amount = check_amount(amount)
    payer = by or user
    identity.require(payer, "topup", amount=amount, account=user)
    check_rate(payer)
    public_id = uuid.uuid4()
    if settings.STRIPE_SECRET_KEY:
        session = _stripe_checkout(user, amount, public_id, base_url.rstrip("/"), payer)
        return TopUp.objects.create(
            public_id=public_id,
            user=user,
            amount=amount,
            provider=PaymentProvider.STRIPE,
            checkout_id=session["id"],
            checkout_url=session["url"],
        )
    if not sandbox_enabled():
        raise Unavailable(_("Top-ups are not available right now."), code="topups_unavailable")
    return TopUp.objects.create(
        public_id=public_id,
        user=user,
        amount=amount,
        provider=PaymentProvider.SANDBOX,
        checkout_id=f"sandbox_{public_id.hex}",
        checkout_url=base_url.rstrip("/") + reverse("billing:sandbox-checkout", args=[public_id]),
    )


def _stripe_checkout(user, amount: Decimal, public_id: uuid.UUID, base_url: str, payer):
    methods = list(settings.STRIPE_PAYMENT_METHODS)
    metadata = {"topup": str(public_id), "user": str(user.public_id)}
    params = {
        "mode": "payment",
        "line_items": [
            {
                "quantity": 1,
                "price_data": {
                    "currency": "cny",
                    "unit_amount": int(amount * FEN),
                    "product_data": {"name": str(_("Wallet top-up"))},
                },
            }
        ],
        "payment_method_types": methods,
        "client_reference_id": str(public_id),
        "customer_email": payer.email,
        "metadata": metadata,
        "payment_intent_data": {"metadata": metadata},
        "success_url": base_url + reverse("billing:topup-success") + f"?topup={public_id}",
        "cancel_url": base_url + reverse("billing:topup-cancel") + f"?topup={public_id}",
    }
    if "wechat_pay" in methods:
        params["payment_method_options"] = {"wechat_pay": {"client": "web"}}
    try:
        return stripe.checkout.Session.create(api_key=settings.STRIPE_SECRET_KEY, **params)
    except stripe.StripeError as exc:
        log.warning("Stripe checkout failed: %s", exc)
        raise Unavailable(_("The payment provider is not available right now; please try again.")) from exc


def get_topup(user, public_id, action: str = "view") -> TopUp:
    topup = TopUp.objects.for_user(user, action).filter(public_id=public_id).first()
    if topup is None:
        raise NotFound(_("No such top-up."))
    return topup


def credit_topup(checkout_id: str, *, amount: Decimal | None = None, payment_reference: str = "") -> LedgerTransaction:
    """Credit a paid top-up's cash, once: the same checkout credited again returns the first transaction."""
    with transaction.atomic():
        topup = TopUp.objects.select_for_update().filter(checkout_id=checkout_id).first()
        if topup is None:
            raise NotFound(_("No such top-up."))
        done = LedgerTransaction.objects.filter(idempotency_key=f"topup:{checkout_id}").first()
        if done is not None:
            return done
        paid = amount if amount is not None else topup.amount
        cash = user_accounts([topup.user_id])[topup.user_id][AccountKind.USER_CASH]
        clearing = system_account(AccountKind.PAYMENT_CLEARING)
        tx = post(
            Posting(
                kind=TransactionKind.TOPUP,
                idempotency_key=f"topup:{checkout_id}",
                entries=((clearing.pk, -paid), (cash.pk, paid)),
                user_id=topup.user_id,
                topup_id=topup.pk,
                reference=str(topup.get_provider_display()),
                provider_reference=payment_reference or checkout_id,
            ),
            locked=lock_accounts([cash.pk, clearing.pk]),
        )
        TopUp.objects.filter(pk=topup.pk).update(
            status=TopUpStatus.PAID, paid_at=timezone.now(), payment_reference=payment_reference or topup.checkout_id
        )
        arrears.reset_alerts(topup.user_id)
    return tx


def pay_sandbox(user, public_id) -> LedgerTransaction:
    """The sandbox checkout's "Pay" button: the same crediting as the webhook, with no money involved."""
    if not sandbox_enabled():
        raise NotFound(_("No such top-up."))
    topup = get_topup(user, public_id)
    if not topup.is_sandbox:
        raise NotFound(_("No such top-up."))
    if topup.status == TopUpStatus.CANCELLED:
        raise ServiceError(_("This top-up was cancelled; start a new one."), code="topup_cancelled")
    return credit_topup(topup.checkout_id, payment_reference=f"sandbox_pay_{topup.public_id.hex}")


def cancel_topup(user, public_id) -> TopUp:
    """The user turned back at checkout: a pending top-up is marked cancelled (a paid one is left alone)."""
    topup = get_topup(user, public_id)
    TopUp.objects.filter(pk=topup.pk, status=TopUpStatus.PENDING).update(status=TopUpStatus.CANCELLED)
    topup.refresh_from_db()
    return topup


# --- The webhook ------------------------------------------------------------------------------------------------------


def handle_webhook(payload: bytes, signature: str) -> str:
    """Verify a Stripe webhook and act on it. Returns what was done (for the log and the response)."""
    secret = settings.STRIPE_WEBHOOK_SECRET
    if not secret:
        raise InvalidSignature(_("Webhooks are not configured."))
    try:
        stripe.Webhook.construct_event(payload, signature, secret)
        event = json.loads(payload)  # verified: read it as plain JSON
    except (ValueError, stripe.SignatureVerificationError) as exc:
        raise InvalidSignature(_("Invalid webhook signature.")) from exc
    kind = event["type"]
    obj = event["data"]["object"]
    handler = WEBHOOK_HANDLERS.get(kind)
    if handler is None:
        return f"ignored {kind}"
    return handler(obj)


def _checkout_completed(session) -> str:
    if session.get("payment_status") != "paid":
        return "waiting for an asynchronous payment"
    amount = Decimal(session["amount_total"]) / FEN if session.get("amount_total") is not None else None
    credit_topup(session["id"], amount=amount, payment_reference=session.get("payment_intent") or "")
    return "credited"


def _checkout_expired(session) -> str:
    TopUp.objects.filter(checkout_id=session["id"], status=TopUpStatus.PENDING).update(status=TopUpStatus.EXPIRED)
    return "expired"


def _topup_for_payment(obj) -> TopUp:
    """The top-up a charge or dispute belongs to: by payment intent, or by the metadata we set at checkout."""
    intent = obj.get("payment_intent") or ""
    topup = TopUp.objects.filter(payment_reference=intent).first() if intent else None
    if topup is None and (public_id := (obj.get("metadata") or {}).get("topup")):
        topup = TopUp.objects.filter(public_id=public_id).first()
    if topup is None:
        # Stripe retries a non-2xx delivery: once the checkout completes, the refund finds its top-up.
        raise Unavailable(_("Unknown payment; try again later."), code="unknown_payment")
    return topup


def _charge_refunded(charge) -> str:
    topup = _topup_for_payment(charge)
    refunded = (Decimal(charge["amount_refunded"]) / FEN).quantize(CENT)
    with transaction.atomic():
        topup = TopUp.objects.select_for_update().get(pk=topup.pk)
        if not LedgerTransaction.objects.filter(topup=topup, kind=TransactionKind.TOPUP).exists():
            credit_topup(topup.checkout_id, payment_reference=charge.get("payment_intent") or "")
        before = -summed(
            LedgerTransaction.objects.filter(topup=topup, kind=TransactionKind.REFUND).aggregate(t=Sum("user_amount"))[
                "t"
            ]
        )
        if refunded <= before:
            return "already recorded"
        _claw_back(topup, refunded - before, TransactionKind.REFUND, f"refund:{charge['id']}:{refunded}", charge["id"])
    return "refund recorded"


def _dispute_created(dispute) -> str:
    topup = _topup_for_payment(dispute)
    amount = (Decimal(dispute["amount"]) / FEN).quantize(CENT)
    with transaction.atomic():
        TopUp.objects.select_for_update().get(pk=topup.pk)
        _claw_back(topup, amount, TransactionKind.DISPUTE, f"dispute:{dispute['id']}", dispute["id"])
    return "dispute recorded"


def _dispute_closed(dispute) -> str:
    if dispute.get("status") != "won":
        return "dispute lost: the amount stays withdrawn"
    topup = _topup_for_payment(dispute)
    amount = (Decimal(dispute["amount"]) / FEN).quantize(CENT)
    with transaction.atomic():
        TopUp.objects.select_for_update().get(pk=topup.pk)
        _claw_back(topup, -amount, TransactionKind.DISPUTE_WON, f"dispute-won:{dispute['id']}", dispute["id"])
    return "dispute reversed"


def _claw_back(topup: TopUp, amount: Decimal, kind: str, key: str, reference: str) -> LedgerTransaction:
    """Take ``amount`` of a top-up back out of the user's cash (negative: give it back). May overdraw the cash."""
    cash = user_accounts([topup.user_id])[topup.user_id][AccountKind.USER_CASH]
    clearing = system_account(AccountKind.PAYMENT_CLEARING)
    return post(
        Posting(
            kind=kind,
            idempotency_key=key,
            entries=((cash.pk, -amount), (clearing.pk, amount)),
            user_id=topup.user_id,
            topup_id=topup.pk,
            reference=str(topup.get_provider_display()),
            provider_reference=reference,
        )
    )


WEBHOOK_HANDLERS = {
    "checkout.session.completed": _checkout_completed,
    "checkout.session.async_payment_succeeded": _checkout_completed,
    "checkout.session.expired": _checkout_expired,
    "charge.refunded": _charge_refunded,
    "charge.dispute.created": _dispute_created,
    "charge.dispute.closed": _dispute_closed,
}
