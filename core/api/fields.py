"""Two rules for every field of the API: text is a JSON string, and a boolean is not a number.

DRF's ``CharField`` takes a JSON number as the text it spells (``{"name": 5}`` is the name "5"), where the API's
schema says a string; a client that sends a number has a bug the API should name, as it does for a boolean. A form
or a query string only carries text, so this changes nothing there. In the same way DRF's ``BooleanField`` takes
0 and 1 for false and true; a JSON body says ``false`` and ``true`` (a form still sends "0", "1", "true"…).
``register`` installs the rules when the console starts (``console.apps``), for every serializer.
"""

from rest_framework import serializers

_drf_text = serializers.CharField.to_internal_value


def _text_only(field, data):
    if not isinstance(data, str):
        field.fail("invalid")
    return _drf_text(field, data)


_drf_boolean = serializers.BooleanField.to_internal_value


def _no_number_as_boolean(field, data):
    if isinstance(data, int | float) and not isinstance(data, bool):
        field.fail("invalid", input=data)
    return _drf_boolean(field, data)


def register() -> None:
    serializers.CharField.to_internal_value = _text_only
    serializers.BooleanField.to_internal_value = _no_number_as_boolean
