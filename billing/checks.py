"""System checks: production must have real Stripe keys (the sandbox checkout is for development only)."""

from django.conf import settings
from django.core.checks import Error, register


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
