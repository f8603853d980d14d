"""The console's navigation, shared by every page."""

from django.urls import NoReverseMatch, reverse
from django.utils.translation import gettext_lazy as _

# (label, URL name, icon). A section whose URL does not exist yet is shown disabled, marked "coming soon",
# and becomes a link as soon as its app registers the URL.
SECTIONS = [
    (_("Dashboard"), "console:dashboard", "speedometer2"),
    (_("Instances"), "instances:list", "cpu"),
    (_("Marketplace"), "marketplace:list", "boxes"),
    (_("Hub"), "marketplace:hub", "database"),
    (_("Storage"), "storage:index", "hdd-stack"),
    (_("Billing"), "billing:wallet", "wallet2"),
]
PUBLIC_LINKS = [
    (_("Pricing"), "billing:pricing"),
    (_("Chip comparison"), "instances:chips"),
    (_("Training estimator"), "instances:estimator"),
]


def _url(name):
    try:
        return reverse(name)
    except NoReverseMatch:
        return None


def navigation(request):
    current = request.path
    sections = []
    for label, name, icon in SECTIONS:
        url = _url(name)
        active = bool(url) and current.startswith(url)
        sections.append({"label": label, "url": url, "icon": icon, "active": active})
    public = [{"label": label, "url": url} for label, name in PUBLIC_LINKS if (url := _url(name))]
    return {"nav_sections": sections, "nav_public": public}
