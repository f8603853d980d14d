"""Cloud storage beyond the free tier, charged once a day per GB-day; and the arrears marks on disks.

SPEC §8: the first ``STORAGE_FREE_GB`` (50 GB) are free; beyond that storage costs the ``storage`` per-GB-day price
(``billing.quote.quote_storage`` — the one place that prices storage). Once a day :func:`charge_day` reads
``storage.quota.usage_snapshot()`` (one query for every user) and books, for each user with billable bytes, one
ledger posting of ``billable GB × price`` from their cash balance (the trial credit pays for compute only; usage
may take the cash below zero, and billing's arrears rules follow). Billable bytes are counted in GB with two
decimal places, rounded up, so 10 MB beyond the free tier is 0.01 GB and never free.

Idempotent per user per day: the posting's idempotency key is ``storage:<user public id>:<day>``, so two beats,
a retried task or a re-run after a crash book each day once. The beat runs hourly; once a day is booked the later
runs see that with one query (:func:`day_charged`) and neither read usage nor lock accounts.
"""

import math
from datetime import date, datetime, timedelta
from decimal import Decimal

from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from billing import arrears
from billing.choices import AccountKind, TransactionKind
from billing.ledger import Posting, lock_user_accounts, post_batch, system_account, user_accounts
from billing.models import LedgerTransaction
from billing.money import ZERO, to_cents
from billing.quote import quote_storage, storage_price

from . import disks, quota

BILLABLE_UNIT = Decimal("0.01")  # GB


def billable_gb(billable_bytes: int) -> Decimal:
    """Bytes beyond the free tier in GB (1024³ bytes), rounded up to 0.01 GB."""
    hundredths = math.ceil(billable_bytes * 100 / quota.GB)
    return Decimal(hundredths) * BILLABLE_UNIT


def day_charge(billable_bytes: int, per_gb_day: Decimal) -> Decimal:
    return to_cents(billable_gb(billable_bytes) * per_gb_day)


def charge_day(day: date | None = None, now: datetime | None = None) -> int:
    """Charge every user's billable storage for ``day`` (default: yesterday). Returns how many were charged."""
    now = now or timezone.now()
    day = day or (timezone.localdate(now) - timedelta(days=1))
    if day_charged(day):
        return 0  # the beat runs hourly: the day's first run booked it, the others stop here
    price = storage_price("storage", now)
    quote_storage("storage", 0, price=price)  # the one pricing rule; validates the row
    dues = [
        (row.user_id, day_charge(row.billable_bytes, price.per_gb_day), row.billable_bytes)
        for row in quota.usage_snapshot()
        if row.billable_bytes > 0
    ]
    dues = [d for d in dues if d[1] > ZERO]
    if not dues:
        return 0
    users = dict(get_user_model().objects.filter(pk__in=[d[0] for d in dues]).values_list("pk", "public_id"))
    user_accounts([uid for uid, *_rest in dues])
    revenue = system_account(AccountKind.REVENUE)
    with transaction.atomic():
        locked = lock_user_accounts([uid for uid, *_rest in dues], [revenue.pk])
        cash = {a.user_id: a for a in locked.values() if a.user_id and a.kind == AccountKind.USER_CASH}
        postings = [
            Posting(
                kind=TransactionKind.STORAGE,
                idempotency_key=f"storage:{users[uid]}:{day.isoformat()}",
                entries=((cash[uid].pk, -amount), (revenue.pk, amount)),
                user_id=uid,
                reference=f"{billable_gb(billable)} GB × {price.per_gb_day} ({day.isoformat()})",
                at=now,
            )
            for uid, amount, billable in dues
        ]
        post_batch(postings, locked=locked)
    return len(postings)


def day_charged(day: date) -> bool:
    """Whether ``day``'s storage charges are booked. One posting for the day is enough: :func:`charge_day` books
    all of a day's postings in one ``post_batch``, one transaction, so they are all there or none is."""
    keys = LedgerTransaction.objects.filter(kind=TransactionKind.STORAGE, idempotency_key__startswith="storage:")
    return keys.filter(idempotency_key__endswith=f":{day.isoformat()}").exists()


def note_disk_arrears(now: datetime | None = None) -> int:
    """Mark the disks of users who owe money (a negative cash balance: disks are paid from cash only) and clear
    the mark once they top up. Billing's arrears notice has told them that disks are kept for the retention
    period; the mark puts the date on each disk."""
    return disks.note_arrears(disks.owners_in_arrears(), now)


def daily(now: datetime | None = None) -> dict:
    now = now or timezone.now()
    charged = charge_day(now=now)
    marked = note_disk_arrears(now)
    expired = disks.expire_arrears(now)
    return {"charged": charged, "disks_marked": marked, "disks": expired, "retention_days": arrears.retention_days()}
