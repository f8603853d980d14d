"""Staff roles: the Django groups "ops" and "finance" and what each may do in the back office.

A migration (``accounts/migrations/0003_staff_roles.py``) creates the groups with these permissions; superusers
may do everything. Non-staff users never learn the back office exists (404); staff without the permission for an
action get a clear 403.
"""

from django.contrib.auth.models import Group, Permission
from django.utils.translation import gettext as _

from core.errors import ServiceError

OPS = "ops"
FINANCE = "finance"

# Custom permissions (declared on console.AuditEntry's Meta), by what they guard.
VIEW_USERS = "console.view_users"
VIEW_AUDIT = "console.view_auditentry"
MANAGE_CAPACITY = "console.manage_capacity"
FORCE_STOP = "console.force_stop_instance"
REVIEW_ENTERPRISE = "console.review_enterprise"
REVIEW_IMAGE = "console.review_image"
VIEW_FINANCE = "console.view_finance"
ADJUST_BALANCE = "console.adjust_balance"
MANAGE_PRICES = "console.manage_prices"
MANAGE_SUBSIDIES = "console.manage_subsidies"

# What each group holds: (app label, codename). Ops runs the fleet and the reviews; finance the money.
# Both read users and the audit log. Finance cannot force-stop; ops cannot adjust balances.
_COMMON = ["view_users", "view_auditentry", "view_user", "view_enterpriseverification"]
GROUP_PERMISSIONS: dict[str, list[tuple[str, str]]] = {
    OPS: [
        ("console", c)
        for c in [*_COMMON, "manage_capacity", "force_stop_instance", "review_enterprise", "review_image"]
    ]
    + [
        ("instances", f"view_{m}")
        for m in [
            "region",
            "zone",
            "chip",
            "node",
            "instancespec",
            "instance",
            "instanceevent",
            "scalingfigure",
            "agentreport",
        ]
    ]
    + [
        ("marketplace", f"view_{m}")
        for m in ["hubitem", "hubfile", "image", "imagevariant", "imageevent", "imagerating"]
    ]
    + [("storage", f"view_{m}") for m in ["entry", "upload", "clouddisk", "diskevent", "hubmount"]],
    FINANCE: [("console", c) for c in [*_COMMON, "view_finance", "adjust_balance", "manage_prices", "manage_subsidies"]]
    + [
        ("billing", f"view_{m}")
        for m in [
            "price",
            "plan",
            "subsidyprogramme",
            "subsidyusage",
            "account",
            "ledgertransaction",
            "ledgerentry",
            "usagesession",
            "topup",
            "trialgrant",
            "wallet",
            "storageprice",
        ]
    ],
}


class Forbidden(ServiceError):
    """A staff member without the role for this action."""

    status = 403
    code = "permission_denied"


def is_staff(user) -> bool:
    return bool(getattr(user, "is_authenticated", False) and user.is_active and user.is_staff)


def can(user, permission: str) -> bool:
    return is_staff(user) and user.has_perm(permission)


def require(user, permission: str) -> None:
    """Refuse (403) unless ``user`` is active staff holding ``permission`` (superusers hold every one)."""
    if not can(user, permission):
        raise Forbidden(_("Your staff role does not allow this action."))


def roles_of(user) -> list[str]:
    if getattr(user, "is_superuser", False):
        return ["superuser"]
    return sorted(g.name for g in user.groups.all())


def sync_groups() -> dict[str, int]:
    """Create the groups and grant every permission their role lists that exists now; returns {group: granted}.
    Only adds: permissions granted by hand are kept."""
    granted = {}
    for name, wanted in GROUP_PERMISSIONS.items():
        group, _created = Group.objects.get_or_create(name=name)
        found = [
            p
            for app_label, codename in wanted
            if (p := Permission.objects.filter(content_type__app_label=app_label, codename=codename).first())
        ]
        group.permissions.add(*found)
        granted[name] = len(found)
    return granted
