"""The console's navigation, shared by every page."""

import functools

from django.urls import get_script_prefix, get_urlconf, reverse
from django.utils.translation import gettext_lazy as _

# (label, URL name, icon).
SECTIONS = [
    (_("Dashboard"), "console:dashboard", "speedometer2"),
    (_("Instances"), "instances:list", "cpu"),
    (_("Jobs"), "jobs:list", "list-task"),
    (_("Inference endpoints"), "endpoints:list", "broadcast"),
    (_("Marketplace"), "marketplace:list", "boxes"),
    (_("Inference templates"), "inference:list", "collection"),
    (_("Hub"), "marketplace:hub", "database"),
    (_("Storage"), "storage:index", "hdd-stack"),
    (_("Billing"), "billing:wallet", "wallet2"),
]
PUBLIC_LINKS = [
    (_("Pricing"), "catalog:pricing"),
    (_("Chip comparison"), "catalog:chips"),
    (_("Training estimator"), "catalog:estimator"),
]


def _url(name):
    return _urls(get_script_prefix(), get_urlconf()).get(name)


@functools.cache
def _urls(prefix: str, urlconf) -> dict[str, str]:
    """The menus' addresses under a script prefix and URL conf (reversed once: every page shows them)."""
    return {name: reverse(name, urlconf=urlconf) for _label, name, *_icon in SECTIONS + PUBLIC_LINKS}


def navigation(request):
    current = request.path
    sections = [{"label": label, "url": _url(name), "icon": icon, "active": False} for label, name, icon in SECTIONS]
    # The section whose URL is the longest prefix of the page's is the current one: /marketplace/inference/ is
    # the inference templates and /marketplace/hub/ the hub, not the marketplace.
    matching = [s for s in sections if s["url"] and current.startswith(s["url"])]
    active = max(matching, key=lambda s: len(s["url"])) if matching else None
    if active is not None:
        active["active"] = True
    public = [{"label": label, "url": _url(name)} for label, name in PUBLIC_LINKS]
    return {
        "nav_sections": sections,
        "nav_public": public,
        "nav_active": active["url"] if active else "",
        "nav_prefix": get_script_prefix(),
    }
