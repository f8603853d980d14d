"""``{% templates_for item as templates %}``: the inference templates of a hub model (the "Deploy as API" card)."""

from django import template

from core import visitor_cache
from inference import template_catalog

# How long a model's templates are kept for its page: the operators' catalogue changes seldom, and a change shows
# within this time.
KEPT_SECONDS = 30

register = template.Library()


@register.simple_tag
def templates_for(item):
    if item.kind != "model":
        return []
    return visitor_cache.kept(
        "inference-templates", lambda: template_catalog.templates_for(item), seconds=KEPT_SECONDS, parts=(item.pk,)
    )
