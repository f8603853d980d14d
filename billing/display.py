"""How an amount of money reads on a page: the one display rule for totals and rates.

Only display: amounts are computed and stored elsewhere (``billing.money``) and the API sends them as exact
decimal strings. A negative amount reads "−¥0.19" everywhere: the minus sign (U+2212) before the currency symbol.
"""

from decimal import Decimal, InvalidOperation

from .money import CURRENCY_SYMBOL, to_cents, trim_rate

MINUS = "\u2212"

# Two rules. An amount (a total, a balance, a charge) is shown to the fen: ¥27,648.00. A unit price or rate (per
# card-hour, per minute, per GB-day, what runs for an hour) is shown exactly as it is priced and charged: at least two
# decimal places and as many more as it has, up to the six places rates are kept at (billing.money.to_rate):
# ¥1.71, ¥0.0285 per minute, ¥0.002083 an hour — never ¥0.03 for ¥0.0285 nor ¥0.00 for a small disk's hour.


def as_decimal(value) -> Decimal | None:
    """``value`` (a Decimal, int or decimal string) as a Decimal; None for empty or unreadable input."""
    if value is None or value == "":
        return None
    try:
        amount = value if isinstance(value, Decimal) else Decimal(str(value))
    except InvalidOperation:
        return None
    return amount if amount.is_finite() else None


def group_digits(amount: Decimal) -> str:
    """Digits grouped by thousands with the minus sign in front: 27648.00 → 27,648.00, -0.19 → −0.19."""
    sign = MINUS if amount < 0 else ""
    whole, _, fraction = f"{abs(amount):f}".partition(".")
    grouped = f"{int(whole):,}"
    return f"{sign}{grouped}.{fraction}" if fraction else f"{sign}{grouped}"


def _with_symbol(amount: Decimal) -> str:
    sign = MINUS if amount < 0 else ""
    return f"{sign}{CURRENCY_SYMBOL}{group_digits(abs(amount))}"


def format_cny(value) -> str:
    """A total to the fen: ¥27,648.00, −¥0.19; empty for no value."""
    amount = as_decimal(value)
    return "" if amount is None else _with_symbol(to_cents(amount))


def rate_amount(value) -> Decimal | None:
    """A unit price as shown: exact to six places, at least two (see above)."""
    amount = as_decimal(value)
    return None if amount is None else trim_rate(amount)


def format_cny_rate(value) -> str:
    """A unit price or rate, exact: ¥1.72, ¥0.0285, ¥0.002083, −¥0.03; empty for no value."""
    amount = rate_amount(value)
    return "" if amount is None else _with_symbol(amount)
