"""``{% arrears_policy %}``: the published arrears policy, the same on the pricing and wallet pages."""

from django import template
from django.conf import settings

from billing.wallet import trial_amount

register = template.Library()


@register.inclusion_tag("billing/partials/arrears_policy.html")
def arrears_policy():
    return {
        "retention_days": settings.ARREARS_RETENTION_DAYS,
        "trial_amount": trial_amount(),
        "trial_days": settings.TRIAL_CREDIT_DAYS,
    }
