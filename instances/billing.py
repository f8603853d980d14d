"""The instances side of the billing ↔ instances contract, in one place.

Every call into the money side goes through here: ``check_launch_funds`` and ``charge_upfront`` in
``billing.wallet``, ``open_usage`` and ``close_usage`` in ``billing.metering`` (issue 4, built at the same time).
The functions are looked up when called, so this app works — and its tests run against a fake — before the
money side lands. Until ``billing.metering`` exists, a missing function logs a warning and does nothing (launches
are then unmetered, which only a development checkout without issue 4 can see).
"""

import logging
import uuid
from datetime import datetime
from importlib import import_module

logger = logging.getLogger(__name__)

KIND = "instance"


def contract(module: str, name: str):
    """The money side's function ``module.name``, or None while it does not exist."""
    try:
        return getattr(import_module(module), name)
    except (ImportError, AttributeError):
        return None


def _call(module: str, name: str, **kwargs):
    func = contract(module, name)
    if func is None:
        logger.warning("%s.%s is not available yet: skipped (billing issue 4)", module, name)
        return None
    return func(**kwargs)


def check_launch_funds(user, quote, *, exclude=None) -> None:
    """Raise PaymentRequired unless ``user`` can pay one hour (or the prepaid term) of ``quote`` on top of one hour
    of what already runs, including launches still on their way up (``exclude``: the instance being started).
    Runs inside the transaction that creates or starts the instance: billing locks the wallet there."""
    func, lock = contract("billing.wallet", "check_launch_funds"), contract("billing.wallet", "lock_wallet")
    if func is None:
        raise RuntimeError("billing.wallet.check_launch_funds is missing: refusing to launch unmetered")
    if lock is not None:
        lock(user)  # before reading what is on its way up, so a concurrent launch's row is seen once it commits
    func(user, quote, pending_per_hour=_pending_per_hour(user, exclude))


def _pending_per_hour(user, exclude=None):
    """What the user's instances on their way up (not billed yet) will cost per hour once running."""
    from django.db.models import Sum

    from .choices import Status
    from .models import Instance

    starting = Instance.objects.filter(owner=user, status__in=(Status.CREATING, Status.STARTING))
    if exclude is not None:
        starting = starting.exclude(pk=exclude.pk)
    total = starting.aggregate(total=Sum("price_per_hour"))["total"]
    return total or 0


def open_usage(instance, quote, started_at: datetime):
    return _call(
        "billing.metering", "open_usage",
        user=instance.owner, kind=getattr(instance, "kind", KIND) or KIND, resource_id=instance.public_id,
        quote=quote, started_at=started_at,
        label=instance.name,
    )  # fmt: skip


def close_usage(resource_id: uuid.UUID, ended_at: datetime):
    return _call("billing.metering", "close_usage", resource_id=resource_id, ended_at=ended_at)


def charge_upfront(instance, quote, term_key: str):
    return _call(
        "billing.wallet", "charge_upfront",
        user=instance.owner, quote=quote, resource_id=instance.public_id,
        idempotency_key=f"instance:{instance.public_id}:term:{term_key}", kind=getattr(instance, "kind", KIND) or KIND,
    )  # fmt: skip


def notify(instance, kind: str, **params):
    """Tell the owner about ``instance`` on their dashboard and by e-mail, linking to its page. Billing keeps the
    one list of a user's notifications (``billing.arrears.notify``)."""
    from billing.arrears import notify as post

    return post(instance.owner_id, kind, name=instance.name, path=instance.get_absolute_url(), **params)
