"""Template filters that show Decimal amounts without ever turning them into floats."""

from decimal import Decimal

from django import template

from billing.display import as_decimal, format_cny, format_cny_rate, group_digits

register = template.Library()

# The filters only apply billing.display's one rule, so every page shows money the same way.
_decimal = as_decimal
_group = group_digits


@register.filter
def cny(value) -> str:
    """A total, to the fen: ¥27,648.00, −¥0.19."""
    return format_cny(value)


@register.filter
def cny_rate(value) -> str:
    """A unit price or rate, exact (at least two places, up to six): ¥1.72, ¥0.0285, ¥0.002083."""
    return format_cny_rate(value)


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
