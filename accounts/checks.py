"""System checks of the console's own settings."""

from decimal import Decimal, InvalidOperation

from django.conf import settings
from django.core.checks import Error, Info, register
from django.utils.module_loading import import_string

from .identity import ACTIONS


@register()
def real_name_settings(app_configs, **kwargs):
    problems = []
    unknown = set(settings.REAL_NAME_REQUIRED_FOR) - ACTIONS
    if unknown:
        problems.append(
            Error(
                f"REAL_NAME_REQUIRED_FOR names unknown actions {sorted(unknown)}; known: {sorted(ACTIONS)}.",
                id="console.E001",
            )
        )
    try:
        Decimal(settings.REAL_NAME_TOPUP_LIMIT)
    except InvalidOperation:
        problems.append(Error("REAL_NAME_TOPUP_LIMIT must be an amount in yuan, e.g. 1000.", id="console.E002"))
    try:
        provider = import_string(settings.IDENTITY_PROVIDER)
    except ImportError as exc:
        problems.append(Error(f"IDENTITY_PROVIDER cannot be imported: {exc}", id="console.E003"))
    else:
        if getattr(provider, "simulated", False) and getattr(settings, "PRODUCTION", False):
            problems.append(
                Info(
                    "IDENTITY_PROVIDER is the development provider, which verifies nobody in production: "
                    "actions that need real-name verification stay closed until a real provider is set.",
                    id="console.I001",
                )
            )
    return problems
