"""What bills by the hour right now, in words: "1 cloud disk", "2 running instances and 1 cloud disk".

The wallet's hourly spend adds up every open usage session; a page that called that "running" would mislead
someone whose instances are all stopped and who only keeps a disk. This says which kinds of resource bill.
"""

from dataclasses import dataclass
from decimal import Decimal

from django.db.models import Count, Sum
from django.utils.translation import ngettext, pgettext

from .choices import UsageKind
from .models import UsageSession
from .money import to_rate

ORDER = (UsageKind.INSTANCE, UsageKind.ENDPOINT, UsageKind.DISK, UsageKind.STORAGE)


@dataclass(frozen=True)
class BillingNow:
    """Open usage sessions of one kind: how many and what they cost per hour together."""

    kind: str
    count: int
    per_hour: Decimal

    @property
    def text(self) -> str:
        n = self.count
        if self.kind == UsageKind.INSTANCE:
            return ngettext("%(count)s running instance", "%(count)s running instances", n) % {"count": n}
        if self.kind == UsageKind.ENDPOINT:
            return ngettext("%(count)s inference endpoint", "%(count)s inference endpoints", n) % {"count": n}
        if self.kind == UsageKind.DISK:
            return ngettext("%(count)s cloud disk", "%(count)s cloud disks", n) % {"count": n}
        return pgettext("billing now", "cloud storage beyond the free tier")


def billing_now(user) -> list[BillingNow]:
    """The kinds of resource billing ``user`` by the hour now, instances first (one query)."""
    open_now = UsageSession.objects.open().filter(user_id=getattr(user, "pk", user))
    per_kind = open_now.values("kind").annotate(count=Count("id"), total=Sum("payable_per_hour")).order_by()
    found = {row["kind"]: row for row in per_kind}
    return [
        BillingNow(kind, found[kind]["count"], to_rate(Decimal(found[kind]["total"] or 0)))
        for kind in ORDER
        if kind in found
    ]


def describe(parts: list[BillingNow]) -> str:
    """'1 running instance, 1 cloud disk' (the list separator is translated: 、 in Chinese)."""
    return pgettext("list separator", ", ").join(part.text for part in parts)
