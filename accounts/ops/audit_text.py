"""An audit entry as a person reads it: what kind of thing was acted on, and each field that changed with its label
and its values in the page's language — never a model's internal name or a Python dict."""

from dataclasses import dataclass
from functools import cache

from django.apps import apps
from django.core.exceptions import FieldDoesNotExist
from django.utils.dateparse import parse_datetime
from django.utils.formats import date_format
from django.utils.text import capfirst
from django.utils.timezone import localtime
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

# Target types that are not a model's own name (``Target("price", …)`` and the like).
_TYPES = {"price": gettext_lazy("price")}
# Keys recorded beside a target's own fields (a user's balance, the transaction that moved it, …).
_KEYS = {
    "cash": gettext_lazy("cash balance"),
    "amount": gettext_lazy("amount"),
    "transaction": gettext_lazy("transaction"),
    "codes": gettext_lazy("codes exported"),
    "reversal_number": gettext_lazy("red-letter invoice number"),
    "number": gettext_lazy("invoice number"),
    "repo": gettext_lazy("repository"),
    "reason": gettext_lazy("reason"),
    "user": gettext_lazy("user"),
    "per_hour": gettext_lazy("price per hour"),
    "shared_code": gettext_lazy("shared code"),
}


@cache
def _models_by_name() -> dict:
    found = {}
    for model in apps.get_models():
        found.setdefault(model._meta.model_name, model)
    return found


def target_kind(type_name: str) -> str:
    """The translated name of a target type: the model's verbose name where it is one."""
    model = _models_by_name().get(type_name)
    if model is not None:
        return capfirst(str(model._meta.verbose_name))
    if type_name in _TYPES:
        return capfirst(str(_TYPES[type_name]))
    return type_name.replace("_", " ")


@dataclass(frozen=True)
class Change:
    label: str
    text: str  # "before → after", or the one value recorded


def changes(entry) -> list[Change]:
    """Each key of ``before`` or ``after``, labelled as the target model's field is (else the key in words)."""
    model = _models_by_name().get(entry.target_type)
    before, after = entry.before or {}, entry.after or {}
    found = []
    for key in dict.fromkeys([*before, *after]):
        field = _field(model, key)
        values = [_value(side[key], field) for side in (before, after) if key in side]
        found.append(Change(_label(model, key), " → ".join(values)))
    return found


def _field(model, key: str):
    if model is None or key in _KEYS:
        return None
    try:
        return model._meta.get_field(key)
    except FieldDoesNotExist:
        return None


def _label(model, key: str) -> str:
    field = _field(model, key)
    if field is not None:
        return capfirst(str(field.verbose_name))
    return capfirst(str(_KEYS.get(key, key.replace("_", " "))))


def _value(value, field=None) -> str:
    if field is not None and getattr(field, "flatchoices", None) and not isinstance(value, (list, dict)):
        labels = {str(k): v for k, v in field.flatchoices}
        if str(value) in labels:
            return str(labels[str(value)])
    moment = _moment(value)
    if moment is not None:
        return date_format(localtime(moment), "Y-m-d H:i")  # a person reads local time
    if value is None or value == "":
        return "—"
    if isinstance(value, bool):
        return _("yes") if value else _("no")
    if isinstance(value, list):
        return ", ".join(_value(v) for v in value) if value else "—"
    if isinstance(value, dict):
        return "; ".join(f"{capfirst(str(k).replace('_', ' '))}: {_value(v)}" for k, v in value.items())
    return str(value)


def _moment(value):
    """An aware date and time written as ISO 8601 (how the log keeps them), or None."""
    if not isinstance(value, str) or len(value) < 16:
        return None
    try:
        moment = parse_datetime(value)
    except ValueError:
        return None
    return moment if moment is not None and moment.tzinfo is not None else None
