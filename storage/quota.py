"""How much a user stores, what is free, what is the ceiling — and the numbers billing reads for GB-day metering.

SPEC §8: the first ``STORAGE_FREE_GB`` (50) are free; beyond that storage is billed per GB-day by the billing
app's metering, which reads :func:`usage_snapshot` once per metering period. ``STORAGE_MAX_GB`` (500) is a hard
ceiling per user: uploads that would pass it are refused before they start and stopped during the transfer.
Bytes of uploads in progress count against the ceiling from the moment the upload is declared, so two
parallel uploads cannot both squeeze under it. Bytes other parts of the console keep for the user (their
published hub repositories, :class:`~storage.models.StoredElsewhere`) count as used, in all three.
"""

from dataclasses import dataclass

from django.conf import settings
from django.db import transaction
from django.db.models import Sum
from django.template.defaultfilters import filesizeformat
from django.utils.translation import gettext as _

from core.errors import ServiceError
from teams.accounts import is_account, is_account_address

from . import tree
from .choices import UsageSource
from .models import Entry, StoredElsewhere, Upload

GB = 1024**3


class QuotaExceeded(ServiceError):
    status = 413
    code = "quota_exceeded"


def free_bytes(user=None) -> int:
    """The free tier: ``STORAGE_FREE_GB`` for a person; none for a team's account (it is per person, as the trial
    credit is, so making teams adds no free space)."""
    if user is not None and is_account(user):
        return 0
    return int(settings.STORAGE_FREE_GB * GB)


def max_bytes() -> int:
    return int(settings.STORAGE_MAX_GB * GB)


def usage_bytes(user, *, besides: str | None = None) -> int:
    """Bytes in the user's stored files (completed uploads only) and kept for them elsewhere. ``besides``: leave
    out what that source keeps (it counts its own bytes live when it checks the ceiling)."""
    return file_bytes(user) + elsewhere_bytes(user, besides=besides)


def file_bytes(user) -> int:
    tree.sync(user)  # what the account's machines wrote counts from this read on
    return Entry.objects.for_user(user).files().aggregate(total=Sum("size"))["total"] or 0


def elsewhere_bytes(user, *, besides: str | None = None) -> int:
    rows = StoredElsewhere.objects.filter(owner=user)
    if besides is not None:
        rows = rows.exclude(source=besides)
    return rows.aggregate(total=Sum("size"))["total"] or 0


def record_elsewhere(user, source: UsageSource, measure) -> None:
    """Set what ``source`` keeps for ``user`` to ``measure()``, its whole total. The row is locked first and the
    total measured after, so two concurrent changes record in turn and the later one's total is the last word."""
    with transaction.atomic():
        StoredElsewhere.objects.get_or_create(owner=user, source=source, defaults={"size": 0})
        row = StoredElsewhere.objects.select_for_update().get(owner=user, source=source)
        size = measure()
        if size <= 0:
            row.delete()  # nothing kept there any more: the owner drops out of the hourly re-recording too
        elif size != row.size:
            row.size = size
            row.save(update_fields=["size", "updated_at"])


def reserved_bytes(user, *, exclude=None) -> int:
    """Bytes declared by the user's uploads in progress, which the quota holds for them until they finish."""
    uploads = Upload.objects.for_user(user).active()
    if exclude is not None:
        uploads = uploads.exclude(pk=exclude.pk)
    return uploads.aggregate(total=Sum("length"))["total"] or 0


@dataclass(frozen=True)
class Usage:
    used: int
    reserved: int
    free: int
    maximum: int
    elsewhere: int = 0  # the part of ``used`` kept by other parts of the console (published hub repositories)

    @property
    def billable(self) -> int:
        return max(0, self.used - self.free)

    @property
    def available(self) -> int:
        return max(0, self.maximum - self.used - self.reserved)

    @property
    def used_percent(self) -> float:
        return min(100.0, 100.0 * self.used / self.maximum) if self.maximum else 100.0

    @property
    def free_percent(self) -> float:
        return min(100.0, 100.0 * self.free / self.maximum) if self.maximum else 0.0


def usage(user) -> Usage:
    elsewhere = elsewhere_bytes(user)
    return Usage(
        used=file_bytes(user) + elsewhere,
        reserved=reserved_bytes(user),
        free=free_bytes(user),
        maximum=max_bytes(),
        elsewhere=elsewhere,
    )


def check(user, length: int, *, upload=None) -> None:
    """Refuse ``length`` more bytes (a new upload, or ``upload`` re-checked during transfer) past the ceiling."""
    ceiling = max_bytes()
    committed = usage_bytes(user) + reserved_bytes(user, exclude=upload)
    if committed + length > ceiling:
        available = max(0, ceiling - committed)
        raise QuotaExceeded(
            _(
                "Not enough storage space: this file needs %(needed)s but only %(available)s of your "
                "%(maximum)s are left. Delete some files and try again."
            )
            % {
                "needed": filesizeformat(length),
                "available": filesizeformat(available),
                "maximum": filesizeformat(ceiling),
            }
        )


@dataclass(frozen=True)
class UserUsage:
    user_id: int
    used_bytes: int
    billable_bytes: int


def usage_snapshot() -> list[UserUsage]:
    """Every user's stored bytes (files and what is kept elsewhere) and the part beyond the free tier, in one
    query (two grouped sums in a UNION): the metering input for GB-day billing (billing multiplies
    ``billable_bytes`` by the period's length and the per-GB-day price)."""
    tree.sync_all()  # machine-written bytes are billed like uploads
    free = free_bytes()
    totals: dict[int, int] = {}
    emails: dict[int, str] = {}
    files, elsewhere = (
        rows.values("owner_id", "owner__email").annotate(total=Sum("size")).order_by()
        for rows in (Entry.objects.files(), StoredElsewhere.objects.all())
    )
    for owner_id, email, total in files.union(elsewhere, all=True).values_list("owner_id", "owner__email", "total"):
        totals[owner_id] = totals.get(owner_id, 0) + (total or 0)
        emails[owner_id] = email
    return [
        UserUsage(owner_id, total, max(0, total - (0 if is_account_address(emails[owner_id]) else free)))
        for owner_id, total in sorted(totals.items())
    ]
