"""Serializer validators that the OpenAPI schema reflects and that refuse with the API's own error codes.

drf-spectacular turns Django's ``RegexValidator``, ``MinValueValidator`` and ``MaxValueValidator`` on a serializer
field into the field's ``pattern``, ``minimum`` and ``maximum``, so the schema states the rule a client must meet.
These subclasses keep that, and refuse a value as the services do: a ``FieldError`` with the service's stable
``code`` (``invalid_size``, ``invalid_voucher_code``…) rather than DRF's generic ``invalid``. DRF passes them the
field (``requires_context``) so the error names it.

A validator is given either a ``message`` and a ``code``, or ``refuse``: the service's own check of the value,
called on a value the validator refuses, which raises the service's error (its message and code) itself; the
message is a lazy string, or a function that makes it (a message with values to fill in).
"""

from django.core import validators
from django.core.exceptions import ValidationError
from rest_framework import serializers

from ..field_errors import FieldError


class _RefusesWithCode:
    requires_context = True

    def _set_refusal(self, message, code, refuse):
        self.refuse = refuse
        if message is not None:
            self.message = message
        if code is not None:
            self.code = code

    def __call__(self, value, field):
        try:
            super().__call__(value)
        except ValidationError:
            if self.refuse is not None:
                self.refuse(value)  # raises the service's own error
            message = self.message() if callable(self.message) else self.message
            raise FieldError(field.field_name, message, code=self.code) from None


class Pattern(_RefusesWithCode, validators.RegexValidator):
    """The whole value matches ``regex`` (write it anchored, ``^…$``, as the schema's ``pattern`` is read)."""

    def __init__(self, regex: str, message=None, code: str | None = None, *, refuse=None):
        super().__init__(regex)
        self._set_refusal(message, code, refuse)


class AtLeast(_RefusesWithCode, validators.MinValueValidator):
    def __init__(self, limit, message=None, code: str | None = None, *, refuse=None):
        super().__init__(limit)
        self._set_refusal(message, code, refuse)


class AtMost(_RefusesWithCode, validators.MaxValueValidator):
    def __init__(self, limit, message=None, code: str | None = None, *, refuse=None):
        super().__init__(limit)
        self._set_refusal(message, code, refuse)


class RequiredText(serializers.CharField):
    """A text field that must not be empty (the schema's ``minLength: 1``), refused when empty with the code the
    service gives the same mistake."""

    def __init__(self, *, empty_message, empty_code: str, **kwargs):
        super().__init__(allow_blank=False, **kwargs)
        self.empty_message, self.empty_code = empty_message, empty_code

    def run_validation(self, data=serializers.empty):
        text = data.strip() if isinstance(data, str) and self.trim_whitespace else data
        if text == "":
            raise FieldError(self.field_name, self.empty_message, code=self.empty_code)
        return super().run_validation(data)


def display_name(max_length: int, field_label, *, also_refused: str = "", refuse=None) -> Pattern:
    """The rule for a name a user gives one of their objects (``core.validators.clean_display_name``): its pattern
    in the schema, refused with the service's own message and code (``refuse``, when the service adds a rule of
    its own: ``also_refused`` characters)."""
    from ..validators import clean_display_name, display_name_pattern

    def refuse_name(value):
        clean_display_name(value, max_length=max_length, field_label=str(field_label))

    return Pattern(display_name_pattern(also_refused), refuse=refuse or refuse_name)
