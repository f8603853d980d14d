"""A choice's label by its enum, for tables that show one per row."""

from django.db import models


def label_of(choices: type[models.Choices], value) -> str:
    """The label of ``value`` among ``choices`` in the active language, or ``value`` itself when it is not one.

    The enum's own lookup by value: a model's generic ``get_FOO_display`` builds and hashes the field's whole list of
    (lazily translated) choices on every call, which a table pays once per row."""
    try:
        return str(choices(value).label)
    except ValueError:
        return value
