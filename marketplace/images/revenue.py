"""The image authors' revenue share: a share (``IMAGE_AUTHOR_SHARE``, default 3%) of the compute that other users
spend on a community image is credited to its author's cash wallet through the ledger.

Metering calls in here from ``billing.metering.charge_sessions`` (the one place compute charges are posted), in
the same database transaction and the same ``post_batch`` as the charges:

1. :func:`author_shares` — before the wallets are locked — finds which charged sessions run a community image of
   another user, so the authors' wallets are locked together with the payers' in one statement, in primary-key
   order (no deadlock between a payer who is also an author elsewhere);
2. :meth:`AuthorShares.postings` turns each charge into at most one payout posting.

Exactly once per charge: a payout's idempotency key is derived from the charge's (``author-share:`` + the charge's
key), so a replayed charge can never pay twice. No drift: like the charges themselves, the payout of a charge is
the difference between the rounded share of the session's running total after and before it, so a session's
payouts always add up to ``to_cents(share × charged)`` however many one-fen charges it was made of. Each payout
is balanced: the author's cash account gains what the operator's author-payouts account gives.
"""

import uuid
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from billing.choices import AccountKind, TransactionKind, UsageKind
from billing.ledger import Posting, system_account, user_accounts
from billing.money import ZERO, to_cents
from instances.models import Instance

from ..choices import ImageCategory
from ..models import ImageVariant

DEFAULT_SHARE = Decimal("0.03")


def share_rate() -> Decimal:
    """The configured share, a Decimal in [0, 1]; a bad setting fails loudly rather than paying a wrong amount."""
    raw = getattr(settings, "IMAGE_AUTHOR_SHARE", DEFAULT_SHARE)
    try:
        rate = Decimal(str(raw))
    except (InvalidOperation, ValueError) as exc:
        raise ImproperlyConfigured(f"IMAGE_AUTHOR_SHARE must be a decimal between 0 and 1, not {raw!r}") from exc
    if not Decimal("0") <= rate <= Decimal("1"):
        raise ImproperlyConfigured(f"IMAGE_AUTHOR_SHARE must be between 0 and 1, not {raw!r}")
    return rate


@dataclass(frozen=True)
class Authorship:
    author_id: int
    image_public_id: uuid.UUID
    image_name: str


@dataclass
class AuthorShares:
    """Which charged resources pay a share to whom, and the accounts the payouts touch."""

    rate: Decimal = ZERO
    by_resource: dict[uuid.UUID, Authorship] = field(default_factory=dict)
    cash_accounts: dict[int, int] = field(default_factory=dict)  # author id → cash account id
    payouts_account_id: int | None = None

    @property
    def author_ids(self) -> set[int]:
        return set(self.cash_accounts)

    @property
    def account_ids(self) -> list[int]:
        ids = list(self.cash_accounts.values())
        return [*ids, self.payouts_account_id] if self.payouts_account_id else ids

    def postings(self, charges, at) -> list[Posting]:
        """One payout per charge of a shared resource: ``charges`` are (session, amount charged now, the
        charge's idempotency key), the session's ``charged`` already including the amount."""
        payouts = []
        for session, amount, charge_key in charges:
            who = self.by_resource.get(session.resource_id)
            if who is None or amount <= 0:
                continue
            payout = to_cents(session.charged * self.rate) - to_cents((session.charged - amount) * self.rate)
            if payout <= 0:
                continue  # less than a fen so far: a later charge of the session carries it
            payouts.append(
                Posting(
                    kind=TransactionKind.AUTHOR_PAYOUT,
                    idempotency_key=f"author-share:{charge_key}",
                    entries=((self.cash_accounts[who.author_id], payout), (self.payouts_account_id, -payout)),
                    user_id=who.author_id,
                    reference=who.image_name[:255],
                    resource_id=who.image_public_id,
                    at=at,
                )
            )
        return payouts


def author_shares(sessions) -> AuthorShares:
    """The authors owed a share of these sessions' charges: instances booting a community image whose author is
    not the one paying. Two queries for any number of sessions (plus account creation the first time)."""
    rate = share_rate()
    instance_ids = [s.resource_id for s in sessions if s.kind == UsageKind.INSTANCE]
    if not rate or not instance_ids:
        return AuthorShares()
    booted = dict(Instance.objects.filter(public_id__among=instance_ids).values_list("public_id", "image"))
    variants = {
        slug: Authorship(owner_id, public_id, name)
        for slug, owner_id, public_id, name in ImageVariant.objects.filter(
            slug__in=set(booted.values()), image__category=ImageCategory.COMMUNITY, image__owner__isnull=False
        ).values_list("slug", "image__owner_id", "image__public_id", "image__name")
    }
    by_resource = {}
    for session in sessions:
        who = variants.get(booted.get(session.resource_id))
        if who is not None and who.author_id != session.user_id:
            by_resource[session.resource_id] = who
    if not by_resource:
        return AuthorShares()
    authors = {who.author_id for who in by_resource.values()}
    cash = {uid: buckets[AccountKind.USER_CASH].pk for uid, buckets in user_accounts(authors).items()}
    payouts = system_account(AccountKind.AUTHOR_PAYOUTS)
    return AuthorShares(rate=rate, by_resource=by_resource, cash_accounts=cash, payouts_account_id=payouts.pk)
