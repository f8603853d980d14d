"""Money: the currency, the precision of every amount, and the one rounding rule.

Amounts are ``Decimal``, never float. Per-hour and per-minute rates keep six decimal places so that a rate like
¥1.026 per card-hour (910B, spot, subsidised) is shown exactly; totals for a term are rounded once, to the fen.
"""

import re
from decimal import ROUND_HALF_UP, Decimal

from django.utils.translation import gettext_lazy

CURRENCY = "CNY"
CURRENCY_SYMBOL = "¥"

# Totals: yuan with two decimal places (fen).
CENT = Decimal("0.01")
MONEY_MAX_DIGITS = 14
MONEY_DECIMAL_PLACES = 2

# Rates per hour, per minute, per card-hour.
RATE_QUANTUM = Decimal("0.000001")
RATE_MAX_DIGITS = 16
RATE_DECIMAL_PLACES = 6

# Factors and rates such as 0.9, 0.75, 0.6, 0.10.
FACTOR_MAX_DIGITS = 5
FACTOR_DECIMAL_PLACES = 4

# The one way a person writes an amount: ASCII digits, an optional decimal point with digits after it, and a minus
# sign (which only some callers accept as meaningful). Decimal() alone also reads full-width digits ("１００"), other
# scripts' digits, underscores ("1_000"), exponents ("1e3") and a plus sign, so "１００" would be taken as 100.
AMOUNT_TEXT = re.compile(r"-?[0-9]+(?:\.[0-9]+)?")
AMOUNT_TEXT_MESSAGE = gettext_lazy("The amount must be a number of yuan written with ASCII digits, e.g. 50 or 49.90.")

ZERO = Decimal("0")
ONE = Decimal("1")
MINUTES_PER_HOUR = 60


def is_plain_amount(text: str) -> bool:
    """Whether ``text`` (already trimmed) is an amount written the one accepted way."""
    return AMOUNT_TEXT.fullmatch(text) is not None


def to_cents(amount: Decimal) -> Decimal:
    """Round a total to the fen, half up: the only rounding of what is charged."""
    return amount.quantize(CENT, rounding=ROUND_HALF_UP)


def to_rate(amount: Decimal) -> Decimal:
    """Round a per-hour or per-minute rate to six decimal places."""
    return amount.quantize(RATE_QUANTUM, rounding=ROUND_HALF_UP)


def trim_rate(amount: Decimal) -> Decimal:
    """A rate with at least two decimal places and no trailing zeros beyond them: 1.026000 → 1.026, 4.8 → 4.80."""
    amount = to_rate(amount).normalize()
    return amount.quantize(CENT) if -amount.as_tuple().exponent < 2 else amount


def summed(value) -> Decimal:
    """A database SUM of fen amounts, exact: SQLite adds decimals in floating point (84.0999999999998), and
    rounding back to the fen recovers the exact total for any realistic number of rows. None (no rows) is zero."""
    return ZERO if value is None else to_cents(Decimal(value))
