"""How an amount of money reads on a page: the one display rule for totals and rates.

Only display: amounts are computed and stored elsewhere (``billing.money``) and the API sends them as exact
decimal strings. A negative amount reads "−¥0.19" everywhere: the minus sign (U+2212) before the currency symbol.
"""

from decimal import ROUND_HALF_UP, Decimal, InvalidOperation

from .money import CENT, CURRENCY_SYMBOL, to_cents

MINUS = "\u2212"

# A rate is shown to the fen like any amount. Only a rate below one fen (a per-GB-day price, a per-minute rate
# of a small disk) would read ¥0.00, so it keeps up to four decimal places: ¥0.0014. Below ¥0.0001 it reads
# "<¥0.0001" rather than a misleading zero.
SMALL_RATE_QUANTUM = Decimal("0.0001")


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
    """A rate rounded for display: to the fen, or to four places when it is below one fen (see above)."""
    amount = as_decimal(value)
    if amount is None:
        return None
    if amount == 0 or abs(amount) >= CENT:
        return to_cents(amount)
    small = amount.quantize(SMALL_RATE_QUANTUM, rounding=ROUND_HALF_UP)
    return small.normalize() if small else small


def format_cny_rate(value) -> str:
    """A price or rate: ¥1.72, ¥0.0014, −¥0.03; empty for no value."""
    amount = rate_amount(value)
    if amount is None:
        return ""
    if amount == 0 and as_decimal(value) != 0:
        return f"{MINUS if as_decimal(value) < 0 else ''}<{CURRENCY_SYMBOL}{SMALL_RATE_QUANTUM}"
    return _with_symbol(amount)
