"""Filters every template has without ``{% load %}`` (a builtin library in ``TEMPLATES``)."""

from django import template

register = template.Library()


@register.filter(expects_localtime=True)
def minute(value) -> str:
    """A moment to the minute in the current time zone, ``2026-12-06 15:04``: what ``|date:"Y-m-d H:i"`` shows,
    without parsing a format for each row of a table."""
    if not value:
        return ""
    try:
        return value.strftime("%Y-%m-%d %H:%M")
    except AttributeError:  # not a moment: shown as nothing, as the date filter does
        return ""
