"""What each team role may do: the one table the services check and the operator's guide shows.

Every team action names one of these permissions; :func:`can` is the only place a role is compared.
"""

from django.db import models
from django.utils.translation import gettext_lazy as _
from django.utils.translation import pgettext_lazy


class Role(models.TextChoices):
    OWNER = "owner", _("Owner")
    ADMIN = "admin", _("Admin")
    DEVELOPER = "developer", _("Developer")
    BILLING = "billing", pgettext_lazy("team role", "Billing")
    READ_ONLY = "read_only", _("Read-only")


VIEW = "view"  # see the team, its members and its resources
OPERATE = "operate"  # launch, stop and release the team's instances, endpoints and disks
BILLING = "billing"  # top up the team's wallet, set members' budgets, read statements
MEMBERS = "members"  # invite, change roles, remove members; read the audit log
OWN = "own"  # make or unmake owners

PERMISSIONS: dict[str, frozenset[str]] = {
    Role.OWNER: frozenset({VIEW, OPERATE, BILLING, MEMBERS, OWN}),
    Role.ADMIN: frozenset({VIEW, OPERATE, BILLING, MEMBERS}),
    Role.DEVELOPER: frozenset({VIEW, OPERATE}),
    Role.BILLING: frozenset({VIEW, BILLING}),
    Role.READ_ONLY: frozenset({VIEW}),
}


def can(role: str, permission: str) -> bool:
    return permission in PERMISSIONS.get(role, frozenset())
