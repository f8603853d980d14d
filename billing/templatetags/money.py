"""Template filters that show Decimal amounts without ever turning them into floats."""

from decimal import Decimal, InvalidOperation

from django import template

from billing.money import CURRENCY_SYMBOL, to_cents, trim_rate

register = template.Library()


def _decimal(value) -> Decimal | None:
    if value is None or value == "":
        return None
    try:
        return value if isinstance(value, Decimal) else Decimal(str(value))
    except InvalidOperation:
        return None


def _group(amount: Decimal) -> str:
    sign = "-" if amount < 0 else ""
    whole, _, fraction = f"{abs(amount)}".partition(".")
    grouped = f"{int(whole):,}"
    return f"{sign}{grouped}.{fraction}" if fraction else f"{sign}{grouped}"


@register.filter
def cny(value) -> str:
    """A total: ¥27,648.00."""
    amount = _decimal(value)
    return "" if amount is None else f"{CURRENCY_SYMBOL}{_group(to_cents(amount))}"


@register.filter
def cny_rate(value) -> str:
    """A rate, as precise as it is: ¥1.026, ¥1.71, ¥4.80."""
    amount = _decimal(value)
    return "" if amount is None else f"{CURRENCY_SYMBOL}{_group(trim_rate(amount))}"


@register.filter
def percent(value, places=1) -> str:
    """A fraction as a percentage: 0.613 → 61.3%."""
    amount = _decimal(value)
    if amount is None:
        return ""
    return f"{(amount * 100).quantize(Decimal(1).scaleb(-int(places)))}%"


@register.filter
def plain(value) -> str:
    """A Decimal without trailing zeros, grouped: 1.600 → 1.6, 27648.00 → 27,648."""
    amount = _decimal(value)
    if amount is None:
        return ""
    normal = amount.normalize()
    if normal.as_tuple().exponent > 0:
        normal = normal.quantize(Decimal(1))
    return _group(normal)
