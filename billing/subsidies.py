"""Which subsidy programme applies to a run, for whom, and how much of it is left.

The ledger books what is granted: it adds to ``SubsidyProgramme.spent`` and to the user's
``SubsidyUsage`` row for the month. This module only reads those caches.
"""

from dataclasses import dataclass, replace
from decimal import Decimal

from .choices import Eligibility
from .models import SubsidyProgramme
from .money import ZERO
from .rules import month_of


def is_verified_enterprise(user) -> bool:
    """Whether ``user`` is a verified enterprise: their latest enterprise verification (SPEC §3) was approved, or,
    for a team's account, its creator's while they own it (``accounts.verification.is_verified``).

    A caller may state the answer on the user object (``user.is_verified_enterprise = True``); otherwise it is
    read from ``accounts.verification`` once and memoised on the object, so a page quoting many prices asks once.
    """
    if user is None or not getattr(user, "is_authenticated", False):
        return False
    stated = getattr(user, "is_verified_enterprise", None)
    if isinstance(stated, bool):
        return stated
    memo = getattr(user, "_verified_enterprise", None)
    if memo is None:
        from accounts.verification import is_verified

        memo = is_verified(user)
        user._verified_enterprise = memo
    return memo


def is_verified_student(user) -> bool:
    """Whether ``user`` is a verified student now (``accounts.students``), read once per user object."""
    if user is None or not getattr(user, "is_authenticated", False):
        return False
    memo = getattr(user, "_verified_student", None)
    if memo is None:
        from accounts.students import is_verified

        memo = is_verified(user)
        user._verified_student = memo
    return memo


# The month a subsidy counts against is the operator's local month (one rule: ``billing.rules.month_of``).
usage_month = month_of


@dataclass(frozen=True)
class ProgrammeTerms:
    """A programme's terms as the quote needs them, read once per price book."""

    id: int
    slug: str
    name: str
    name_zh: str
    rate: Decimal
    chip_ids: frozenset[int]
    zone_ids: frozenset[int]
    eligibility: str
    remaining: Decimal | None
    monthly_cap: Decimal | None

    @classmethod
    def from_programme(cls, programme: SubsidyProgramme, *, chip_ids, zone_ids) -> "ProgrammeTerms":
        """Build from a programme and the ids of its chips and zones. ``remaining`` is what was left of its budget
        when the programme row was read (see :meth:`with_spent`)."""
        return cls(
            id=programme.pk,
            slug=programme.slug,
            name=programme.name,
            name_zh=programme.name_zh,
            rate=programme.rate,
            chip_ids=frozenset(chip_ids),
            zone_ids=frozenset(zone_ids),
            eligibility=programme.eligibility,
            remaining=programme.remaining,
            monthly_cap=programme.monthly_cap_per_user,
        )

    def with_spent(self, budget: Decimal | None, spent: Decimal) -> "ProgrammeTerms":
        """These terms with what is left of ``budget`` after ``spent`` (None: no budget, no limit)."""
        remaining = None if budget is None else max(budget - spent, ZERO)
        return replace(self, remaining=remaining)

    @property
    def label(self) -> str:
        return SubsidyProgramme(name=self.name, name_zh=self.name_zh).label

    def covers(self, chip_id: int | None, zone_id: int | None) -> bool:
        """Whether a run of ``chip_id`` in ``zone_id`` is inside the programme (empty sets mean "any")."""
        if chip_id is None:
            return False  # subsidies are for cards, not the CPU-only mode
        if self.chip_ids and chip_id not in self.chip_ids:
            return False
        return not self.zone_ids or zone_id in self.zone_ids

    def admits(self, user) -> bool:
        if self.eligibility == Eligibility.VERIFIED_ENTERPRISE:
            return is_verified_enterprise(user)
        if self.eligibility == Eligibility.STUDENT:
            return is_verified_student(user)
        return True

    def available(self, used_this_month: Decimal) -> Decimal | None:
        """How much more subsidy one user may get now: the lower of the budget left and the cap left.

        None means unlimited. Never negative.
        """
        limits = [self.remaining] if self.remaining is not None else []
        if self.monthly_cap is not None:
            limits.append(max(self.monthly_cap - used_this_month, ZERO))
        return min(limits) if limits else None
