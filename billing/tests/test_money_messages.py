"""Money in messages reads like money on every page: amounts to the fen, unit prices exactly, and a minus
sign before the ¥ — never "¥-3.00", nor a price rounded away (¥0.00 for a small disk's hour)."""

from decimal import Decimal

import pytest
from django.utils import translation

from billing import ledger, wallet
from billing.models import Notification
from core.errors import PaymentRequired

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def english():
    with translation.override("en"):
        yield


def _refusal(user, needed, **kw) -> str:
    with pytest.raises(PaymentRequired) as refused:
        wallet.require_funds(user, Decimal(needed), **kw)
    return refused.value.message


def test_a_refused_launch_shows_the_hourly_price_exactly_and_the_balance_to_the_fen(owner, fund):
    fund(owner, "1")
    message = _refusal(owner, "1.71", compute=True)
    assert message == "Launching needs ¥1.71 and your balance is ¥1.00. Top up to continue."


def test_a_refused_disk_shows_a_price_below_a_fen_exactly(owner):
    message = _refusal(owner, "0.001389", compute=False)
    assert message.startswith("This needs ¥0.001389 for its first hour and your cash balance is ¥0.00.")


def test_the_spending_cap_refusal_shows_both_amounts_to_the_fen(owner, fund):
    fund(owner, "20")
    wallet.set_spending_cap(owner, "0")
    message = _refusal(owner, "1.5", compute=True)
    assert message == "This would pass your monthly spending cap of ¥0.00 (¥0.00 spent this month)."


def test_a_withdrawal_beyond_the_cash_balance_shows_amounts_to_the_fen(owner):
    with pytest.raises(ledger.InsufficientFunds) as refused:
        wallet.withdraw_cash(user=owner, amount="10", idempotency_key="w-1")
    assert refused.value.message == "Not enough balance: ¥10.00 is needed and your cash balance is ¥0.00."


@pytest.mark.parametrize(
    ("kind", "params", "expected"),
    [
        ("low_balance", {"balance": "-3.00", "hourly": "1.718333"}, "Your balance of −¥3.00 covers less than one hour"),
        ("spending_cap", {"cap": "100"}, "You reached your monthly spending cap of ¥100.00."),
        ("trial_expired", {"amount": "7.5"}, "Your trial credit of ¥7.50 expired."),
    ],
)
def test_notifications_show_amounts_to_the_fen_with_the_minus_before_the_yen(owner, kind, params, expected):
    message = Notification(user=owner, kind=kind, params=params).message
    assert expected in message and "¥-" not in message
