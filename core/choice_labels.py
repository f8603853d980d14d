"""Choice labels at the cost of a dict lookup.

Django's ``get_FOO_display`` builds a dict of every choice of the field on each call (about 50 µs for a dozen
translated labels): a list page pays it for every row and column that shows a label. A model that mixes in
:class:`ChoiceLabels` looks the label up in a dict built once per field, and returns the same text.
"""

from functools import cache

from django.utils.encoding import force_str
from django.utils.hashable import make_hashable


@cache
def _labels(field) -> dict:
    return {make_hashable(value): label for value, label in field.flatchoices}


class ChoiceLabels:
    """Mix into a model before ``models.Model``: its ``get_FOO_display`` methods read :func:`_labels`."""

    def _get_FIELD_display(self, field):
        value = getattr(self, field.attname)
        return force_str(_labels(field).get(make_hashable(value), value), strings_only=True)


def label(model, name: str, value) -> str:
    """What ``get_<name>_display`` shows for ``value`` of ``model``'s field ``name``, for a row read as values."""
    return force_str(_labels(model._meta.get_field(name)).get(make_hashable(value), value), strings_only=True)
