"""The back office's staff sidebar: the pages the current staff member's role opens."""

from django import template
from django.urls import reverse
from django.utils.translation import gettext_lazy as _

from accounts.ops import roles

register = template.Library()

# (label, URL name, icon, permissions of which one is needed; empty: any staff)
PAGES = [
    (_("Overview"), "ops:index", "grid", ()),
    (_("Capacity"), "ops:capacity", "hdd-rack", (roles.MANAGE_CAPACITY,)),
    (_("Revenue & subsidies"), "ops:revenue", "graph-up", (roles.VIEW_FINANCE,)),
    (_("Price list"), "ops:prices", "tags", (roles.VIEW_FINANCE,)),
    (_("Subsidy programmes"), "ops:subsidies", "piggy-bank", (roles.VIEW_FINANCE,)),
    (_("Vouchers"), "ops:vouchers", "ticket-perforated", (roles.VIEW_FINANCE,)),
    (_("Invoices"), "ops:invoices", "receipt", (roles.ADJUST_BALANCE,)),
    (_("Review queues"), "ops:reviews", "check2-square", (roles.REVIEW_ENTERPRISE, roles.REVIEW_IMAGE)),
    (_("Hub repositories"), "ops:hub", "boxes", (roles.REVIEW_IMAGE,)),
    (_("Users"), "ops:users", "people", (roles.VIEW_USERS,)),
    (_("Audit log"), "ops:audit", "journal-text", (roles.VIEW_AUDIT,)),
]


@register.inclusion_tag("ops/partials/nav.html", takes_context=True)
def ops_nav(context):
    request = context["request"]
    user = request.user
    items = []
    for label, name, icon, permissions in PAGES:
        if not permissions or any(roles.can(user, p) for p in permissions):
            url = reverse(name)
            active = request.path == url if name == "ops:index" else request.path.startswith(url)
            items.append({"label": label, "url": url, "icon": icon, "active": active})
    return {"items": items, "show_admin": roles.is_staff(user)}


# A staff role by its name in the page's language, never the group's slug.
_ROLE_NAMES = {
    roles.OPS: _("Operations"),
    roles.FINANCE: _("Finance"),
    "superuser": _("Superuser"),
}


@register.filter
def staff_role(role) -> str:
    """``ops`` → 运维 (Operations in English); a group without a known name as it is called."""
    return str(_ROLE_NAMES.get(role, role))
