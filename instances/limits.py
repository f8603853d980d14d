"""Per-account limits: how many machines one account (a person, or a team's account) holds at once, and how many
of them CPU-only.

A machine counts from its launch or start until it has stopped (creating, starting, running, stopping): the
states in which it holds cards, CPU and memory. The figures are the back office's ``AccountLimit`` rows (the
account's own, else the default row, else the ``ACCOUNT_MAX_MACHINES`` and ``ACCOUNT_MAX_CPU_ONLY`` settings).

The check runs inside the transaction that creates or starts the machine, under the owner's wallet lock (the
funds check takes the same lock): concurrent launches of one account queue there, and each counts the machines
the others committed, so together they never exceed the limit.
"""

from django.conf import settings
from django.db.models import Count, Q
from django.utils.translation import gettext as _

from billing import wallet
from core.errors import Forbidden

from .choices import ACTIVE
from .models import AccountLimit, Instance


class LimitReached(Forbidden):
    """The account holds as many machines (or CPU-only machines) as its limit allows."""

    code = "machine_limit"


def limits_for(account) -> tuple[int, int]:
    """(machines at once, CPU-only machines at once) for ``account``: its own row's figures, else the default's."""
    rows = {row.account_id: row for row in AccountLimit.objects.filter(Q(account=account) | Q(account__isnull=True))}
    machines, cpu_only = int(settings.ACCOUNT_MAX_MACHINES), int(settings.ACCOUNT_MAX_CPU_ONLY)
    for row in (rows.get(None), rows.get(account.pk)):  # the account's own figures win
        if row is not None:
            machines = row.max_machines if row.max_machines is not None else machines
            cpu_only = row.max_cpu_only if row.max_cpu_only is not None else cpu_only
    return machines, cpu_only


def check_launch(owner, *, cpu_only: bool, exclude: Instance | None = None) -> None:
    """Refuse (403, naming the limit and how to raise it) a launch or start that would take ``owner`` past its
    limits; ``exclude``: the instance being started. Call inside the transaction that creates or starts it."""
    wallet.lock_wallet(owner)
    held = Instance.objects.filter(owner=owner, status__in=ACTIVE)
    if exclude is not None:
        held = held.exclude(pk=exclude.pk)
    counts = held.aggregate(machines=Count("pk"), cpu_only=Count("pk", filter=Q(chip__isnull=True)))
    max_machines, max_cpu_only = limits_for(owner)
    if counts["machines"] >= max_machines:
        message = _(
            "This account already runs %(count)s machines, its limit of machines at once (%(limit)s). Stop one, "
            "or ask the operator to raise the limit%(contact)s."
        ) % {"count": counts["machines"], "limit": max_machines, "contact": _contact()}
        raise LimitReached(message)
    if cpu_only and counts["cpu_only"] >= max_cpu_only:
        message = _(
            "This account already runs %(count)s CPU-only machines, its limit of CPU-only machines at once "
            "(%(limit)s). Stop one, or ask the operator to raise the limit%(contact)s."
        ) % {"count": counts["cpu_only"], "limit": max_cpu_only, "contact": _contact()}
        raise LimitReached(message, code="cpu_only_limit")


def _contact() -> str:
    contact = (settings.LIMITS_CONTACT or "").strip()
    return _(" (%(contact)s)") % {"contact": contact} if contact else ""
