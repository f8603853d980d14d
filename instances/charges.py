"""The instances side of the billing ↔ instances contract, in one place.

Every call into the money side goes through here, as plain calls into ``billing.wallet`` (the funds gate, up-front
charges) and ``billing.metering`` (usage sessions). Nothing is looked up by name: a broken money side fails the
import, or raises inside the transaction that would have started the instance, so an instance never runs
unmetered.
"""

import uuid
from datetime import datetime
from decimal import Decimal

from django.utils import timezone

from billing import arrears, budgets, metering, wallet
from billing.money import to_cents

from .choices import Status
from .models import Instance

KIND = "instance"


def check_launch_funds(user, quote, *, by=None, exclude=None, extra_per_hour=0) -> None:
    """The gate every machine passes before it starts, queued or not: raise PaymentRequired unless ``user`` can pay
    one hour (or the prepaid term) of ``quote`` on top of one hour of what already runs, including launches still on
    their way up (``exclude``: the instance being started); on a team's wallet, ``by`` (the member or their id, whose
    budget the machine spends) must also have that much left of their monthly budget (402 ``budget_exceeded``).
    ``extra_per_hour``: what else the launch adds per hour on the member's budget (a new data disk).
    Runs inside the transaction that creates or starts the instance: billing locks the wallet there, before what
    is on its way up is read, so a concurrent launch's row is seen once it commits, and members launching at once
    are counted one after the other."""
    wallet.lock_wallet(user)
    wallet.check_launch_funds(user, quote, pending_per_hour=_pending_per_hour(user, exclude))
    member_id = getattr(by, "pk", by)
    if member_id is None or member_id == user.pk:
        return
    pending = _pending_per_hour(user, exclude, launched_by=member_id)
    needed = wallet.needed_to_launch(quote) + to_cents(Decimal(extra_per_hour))
    budgets.check_launch(user.pk, member_id, needed, pending_per_hour=pending)


def _pending_per_hour(user, exclude=None, *, launched_by=None):
    """What the user's instances on their way up (not billed yet) will take once running: an hour of a
    pay-as-you-go one, the whole term of a prepaid one whose term is not paid yet (it is charged when it runs)."""
    starting = Instance.objects.filter(owner=user, status__in=(Status.CREATING, Status.STARTING))
    if launched_by is not None:
        starting = starting.filter(launched_by_id=launched_by)
    if exclude is not None:
        starting = starting.exclude(pk=exclude.pk)
    now = timezone.now()
    total = Decimal(0)
    for rate, period, term_ends in starting.values_list("price_per_hour", "plan__period_minutes", "term_ends_at"):
        unpaid_term = period > 1 and (term_ends is None or term_ends <= now)
        total += (rate or 0) * (Decimal(period) / 60 if unpaid_term else 1)
    return total


def _kind(instance) -> str:
    return getattr(instance, "kind", KIND) or KIND


def _member_id(instance):
    """On a team's instance, the member who launched it: the team's charges for it count against their budget."""
    by = getattr(instance, "launched_by_id", None)
    return by if by is not None and by != instance.owner_id else None


def open_usage(instance, quote, started_at: datetime):
    return metering.open_usage(
        user=instance.owner,
        kind=_kind(instance),
        resource_id=instance.public_id,
        quote=quote,
        started_at=started_at,
        label=instance.name,
        member_id=_member_id(instance),
    )


def close_usage(resource_id: uuid.UUID, ended_at: datetime):
    return metering.close_usage(resource_id=resource_id, ended_at=ended_at)


def charge_upfront(instance, quote, term_key: str):
    return wallet.charge_upfront(
        user=instance.owner,
        quote=quote,
        resource_id=instance.public_id,
        idempotency_key=f"instance:{instance.public_id}:term:{term_key}",
        kind=_kind(instance),
        member_id=_member_id(instance),
    )


def notify(instance, kind: str, **params):
    """Tell the owner about ``instance`` on their dashboard and by e-mail, linking to its page. Billing keeps the
    one list of a user's notifications (``billing.arrears.notify``)."""
    return arrears.notify(instance.owner_id, kind, name=instance.name, path=instance.get_absolute_url(), **params)
