"""The API's serializers: JSON is taken as the API's schema types it — text is a JSON string, a boolean is not a number.

DRF's ``CharField`` takes a JSON number as the text it spells (``{"name": 5}`` is the name "5") and its
``BooleanField`` takes 0 and 1 for false and true, where the schema says a string and a boolean: a client that sends
them has a bug the API should name. Every serializer of the API derives from :class:`Serializer` or
:class:`ModelSerializer` here, which refuse such values in a JSON body with the field's own "invalid" error before
DRF reads it (a list's or a dict's items too). A form or a query string carries only text, so nothing changes there.
"""

from collections.abc import Mapping

from django.http import QueryDict
from rest_framework import serializers
from rest_framework.exceptions import ValidationError


def _check(field, value) -> None:
    """Raise the field's "invalid" error when ``value`` from a JSON body is not of the field's JSON type."""
    if value is None:
        return  # the field's own null rule decides
    if isinstance(field, serializers.ListField) and isinstance(value, list):
        for item in value:
            _check(field.child, item)
    elif isinstance(field, serializers.DictField) and isinstance(value, Mapping):
        for item in value.values():
            _check(field.child, item)
    elif isinstance(field, serializers.CharField) and not isinstance(value, str):  # EmailField, SlugField… as well
        field.fail("invalid")
    elif isinstance(field, serializers.BooleanField) and isinstance(value, int | float) and not isinstance(value, bool):
        field.fail("invalid", input=value)


class StrictTypes:
    def to_internal_value(self, data):
        if isinstance(data, Mapping) and not isinstance(data, QueryDict):
            errors = {}
            for field in self.fields.values():
                if field.read_only or field.field_name not in data:
                    continue
                try:
                    _check(field, data[field.field_name])
                except ValidationError as exc:
                    errors[field.field_name] = exc.detail
            if errors:
                raise ValidationError(errors)
        return super().to_internal_value(data)


class Serializer(StrictTypes, serializers.Serializer):
    pass


class ModelSerializer(StrictTypes, serializers.ModelSerializer):
    pass
