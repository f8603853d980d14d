"""System checks: production must have real Stripe keys (the sandbox checkout is for development only), and
something must stop a user's resources when their balance runs out."""

from django.conf import settings
from django.core.checks import Error, register
from django.utils.module_loading import import_string

from .arrears import registered_handler
from .metering import registered_author_shares


@register()
def stripe_keys_in_production(app_configs, **kwargs):
    if not settings.PRODUCTION:
        return []
    missing = [name for name in ("STRIPE_SECRET_KEY", "STRIPE_WEBHOOK_SECRET") if not getattr(settings, name, "")]
    return [
        Error(
            f"Production needs {name} (or {name}_FILE): top-ups go through Stripe; the sandbox checkout is refused.",
            id="billing.E001",
        )
        for name in missing
    ]


@register()
def arrears_handler_registered(app_configs, **kwargs):
    if registered_handler() is not None:
        return []
    return [
        Error(
            "No arrears handler is registered: nothing would stop a user's instances when their balance runs out. "
            "The instances app registers one when it is installed.",
            id="billing.E002",
        )
    ]


@register()
def author_shares_registered(app_configs, **kwargs):
    if registered_author_shares() is not None:
        return []
    return [
        Error(
            "No image author revenue share is registered: charges could not pay community image authors. "
            "The marketplace app registers it when it is installed.",
            id="billing.E003",
        )
    ]


@register()
def einvoice_provider_importable(app_configs, **kwargs):
    """A misspelt EINVOICE_PROVIDER stops the console at start, not at finance's first click."""
    if not settings.EINVOICE_PROVIDER:
        return []
    try:
        import_string(settings.EINVOICE_PROVIDER)
    except ImportError as exc:
        return [Error(f"EINVOICE_PROVIDER={settings.EINVOICE_PROVIDER!r} cannot be imported: {exc}", id="billing.E004")]
    return []
