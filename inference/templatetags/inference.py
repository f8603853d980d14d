"""``{% templates_for item as templates %}``: the inference templates of a hub model (the "Deploy as API" card)."""

from django import template

from inference import template_catalog

register = template.Library()


@register.simple_tag
def templates_for(item):
    return template_catalog.templates_for(item) if item.kind == "model" else []
