"""One rule for every text field of the API: text is a JSON string.

DRF's ``CharField`` takes a JSON number as the text it spells (``{"name": 5}`` is the name "5"), where the API's
schema says a string; a client that sends a number has a bug the API should name, as it does for a boolean. A form
or a query string only carries text, so this changes nothing there. ``register`` installs the rule when the
console starts (``console.apps``), for every serializer's text fields (slugs, e-mail addresses and paths too).
"""

from rest_framework import serializers

_drf_text = serializers.CharField.to_internal_value


def _text_only(field, data):
    if not isinstance(data, str):
        field.fail("invalid")
    return _drf_text(field, data)


def register() -> None:
    serializers.CharField.to_internal_value = _text_only
