"""Vouchers (代金券): batches the operator creates, codes customers redeem, and the voucher accounts that pay first.

A batch says what each voucher is worth, until when, what it covers (chips, zones, plans; a minimum spend limits it
to prepaid plans costing at least that much), how many may be redeemed and whether one person may redeem more than
one. Its codes are either one each (printed on a card, sent by mail) or one shared code used up to the batch's
number of times.

Redeeming a code gives the wallet it is redeemed into (the person's, or a team's in its context) a voucher: an
account of its own, funded from the operator's "vouchers issued" account, that pays for covered compute before the
trial credit and cash (``billing.rules.split_payment`` writes the order down). What is left at expiry moves to the
operator's "vouchers expired" account. Exactly once: a code's use count only grows by a conditional ``UPDATE``, and
a person's second voucher of the same code or of a one-per-person batch breaks a unique constraint, so concurrent
redemptions of one code cannot give more vouchers than it allows.
"""

import re
import secrets
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from django.core.cache import cache
from django.db import IntegrityError, transaction
from django.db.models import Case, Count, F, IntegerField, Prefetch, Sum, Value, When
from django.utils import timezone
from django.utils.formats import date_format
from django.utils.translation import gettext as _

from core.errors import Conflict, ServiceError
from core.field_errors import FieldError

from . import arrears, rules
from .choices import AccountKind, NotificationKind, TransactionKind
from .display import format_cny
from .ledger import Posting, lock_accounts, post, system_account
from .models import Account, LedgerEntry, Voucher, VoucherBatch, VoucherCode
from .money import ZERO, summed

CODE_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"  # no 0/O, 1/I: read off a card without doubt
CODE_LENGTH = 12
SHARED_CODE = re.compile(r"^[A-Z0-9]{6,32}$")
CODE_AS_TYPED = r"^[\s-]*(?:[A-Za-z0-9][\s-]*){6,32}$"  # the API's pattern: normalise_code drops spaces and dashes
REDEEM_ATTEMPTS_PER_HOUR = 20  # per person: guessing codes through "no such code" answers takes forever
MAX_CODES_PER_BATCH = 10_000


def normalise_code(text) -> str:
    """A code as typed: any case, with spaces or dashes between its groups."""
    return re.sub(r"[\s\-]", "", text).upper() if isinstance(text, str) else ""


def display_code(code: str) -> str:
    """A generated code in groups of four (ABCD-EFGH-JKLM); a shared code as the operator wrote it."""
    if len(code) == CODE_LENGTH and set(code) <= set(CODE_ALPHABET):
        return "-".join(code[i : i + 4] for i in range(0, CODE_LENGTH, 4))
    return code


# --- What a wallet holds ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Held:
    """A usable voucher in a wallet: its account, what it covers and when it expires."""

    account_id: int
    expires_at: datetime
    cover: rules.VoucherCover


def _cover(batch: VoucherBatch) -> rules.VoucherCover:
    return rules.VoucherCover(
        chips=frozenset(c.slug for c in batch.chips.all()),
        zones=frozenset(z.slug for z in batch.zones.all()),
        plans=frozenset(p.slug for p in batch.plans.all()),
        min_spend=batch.min_spend,
    )


def _with_batch(queryset):
    return queryset.select_related("batch", "account").prefetch_related(
        Prefetch("batch__chips"), Prefetch("batch__zones"), Prefetch("batch__plans")
    )


def held(user_ids, now: datetime) -> dict[int, list[Held]]:
    """The usable vouchers of these wallets, soonest expiry first (read without locks: the charge locks the
    accounts and spends only what their locked balances hold)."""
    vouchers = _with_batch(Voucher.objects.filter(user_id__among=set(user_ids)).usable(now)).order_by(
        "expires_at", "pk"
    )
    found: dict[int, list[Held]] = defaultdict(list)
    for v in vouchers:
        found[v.user_id].append(Held(v.account_id, v.account.expires_at, _cover(v.batch)))
    return found


def covering(held_vouchers: list[Held], balances: dict[int, Decimal], now: datetime, **charge) -> list[tuple]:
    """(account, what is left) of the vouchers in ``held_vouchers`` (usable when :func:`held` read them) that pay
    for ``charge`` (see :func:`billing.rules.voucher_covers`) and still hold something, in the order they pay."""
    return [
        (h.account_id, balances[h.account_id])
        for h in held_vouchers
        if balances.get(h.account_id, ZERO) > 0 and rules.voucher_covers(h.cover, **charge)
    ]


def covering_total(user, now: datetime, **charge) -> Decimal:
    """What the user's vouchers hold for such a charge: the funds gate counts it with the trial credit and cash."""
    mine = held([user.pk], now).get(user.pk, [])
    balances = dict(Account.objects.filter(pk__in=[h.account_id for h in mine]).values_list("pk", "balance"))
    return sum((left for _a, left in covering(mine, balances, now, **charge)), ZERO)


@dataclass(frozen=True)
class VoucherView:
    """A voucher as the wallet page and the API show it."""

    id: str
    name: str
    amount: Decimal
    balance: Decimal
    expires_at: datetime
    expired: bool
    covers: str


def describe_cover(batch: VoucherBatch) -> str:
    parts = []
    if batch.chips.all():
        parts.append(", ".join(c.label for c in batch.chips.all()))
    if batch.zones.all():
        parts.append(", ".join(z.label for z in batch.zones.all()))
    if batch.plans.all():
        parts.append(", ".join(p.label for p in batch.plans.all()))
    text = " · ".join(parts) if parts else _("all compute")
    if batch.min_spend > 0:
        text += " · " + _("prepaid plans of %(amount)s or more") % {"amount": format_cny(batch.min_spend)}
    return text


def vouchers_of(user, *, limit: int = 200) -> list[VoucherView]:
    """The wallet's vouchers, usable ones first (soonest expiry first), then the spent and expired (newest first);
    one query. ``limit`` is far above what a wallet holds: usable vouchers come first, so none is left out."""
    now = timezone.now()
    usable = Voucher.objects.filter(user=user).usable(now).values("pk")
    rank = Case(When(pk__in=usable, then=Value(0)), default=Value(1), output_field=IntegerField())
    rows = list(
        _with_batch(Voucher.objects.filter(user=user)).annotate(rank=rank).order_by("rank", "expires_at", "-pk")[:limit]
    )
    views = [
        VoucherView(
            id=str(v.public_id),
            name=v.batch.label,
            amount=v.amount,
            balance=v.account.balance,
            expires_at=v.expires_at,
            expired=v.expires_at <= now,
            covers=describe_cover(v.batch),
        )
        for v in rows
    ]
    return sorted(views, key=lambda v: (v.expired or v.balance <= 0, v.expires_at))


# --- Redeeming ----------------------------------------------------------------------------------------------------


class TooManyAttempts(ServiceError):
    status = 429


def _check_attempts(person) -> None:
    key = f"voucher-attempts:{person.pk}:{int(timezone.now().timestamp()) // 3600}"
    cache.add(key, 0, timeout=3600)
    if cache.incr(key) > REDEEM_ATTEMPTS_PER_HOUR:
        raise TooManyAttempts(
            _("Too many voucher codes tried. Please wait an hour and try again."), code="voucher_rate_limited"
        )


def check_code(code) -> str:
    text = normalise_code(code)
    if not SHARED_CODE.match(text):
        raise FieldError("code", _("Enter the voucher's code, e.g. ABCD-EFGH-JKLM."), code="invalid_voucher_code")
    return text


def redeem(user, code, *, by) -> Voucher:
    """Redeem ``code`` into ``user``'s wallet (``by``: the person typing it). Exactly once per allowed use; at most
    ``REDEEM_ATTEMPTS_PER_HOUR`` tries a person an hour."""
    text = check_code(code)
    _check_attempts(by)
    now = timezone.now()
    with transaction.atomic():
        row = VoucherCode.objects.select_related("batch").filter(code=text).first()
        if row is None:
            raise FieldError(
                "code", _("No voucher has this code. Check it and try again."), code="unknown_voucher", status=404
            )
        batch = row.batch
        if batch.expires_at <= now:
            raise FieldError(
                "code",
                _("This voucher expired on %(date)s.")
                % {"date": date_format(timezone.localtime(batch.expires_at), "DATE_FORMAT")},
                code="voucher_expired",
                status=409,
            )
        if Voucher.objects.filter(redeemed_by=by, code=row).exists():
            raise Conflict(_("You have already redeemed this code."), code="voucher_already_redeemed")
        if batch.one_per_user and Voucher.objects.filter(redeemed_by=by, once_per_person=batch).exists():
            raise Conflict(
                _("You already have a voucher of “%(name)s”: one per person.") % {"name": batch.label},
                code="voucher_once_per_person",
            )
        if not VoucherCode.objects.filter(pk=row.pk, redeemed__lt=F("uses")).update(redeemed=F("redeemed") + 1):
            raise Conflict(_("This code has already been used up."), code="voucher_used_up")
        account = Account.objects.create(kind=AccountKind.USER_VOUCHER, user=user, expires_at=batch.expires_at)
        voucher = Voucher(
            batch=batch,
            code=row,
            user=user,
            redeemed_by=by,
            account=account,
            amount=batch.amount,
            expires_at=batch.expires_at,
            redeemed_at=now,
            once_per_person=batch if batch.one_per_user else None,
        )
        try:
            with transaction.atomic():
                voucher.save()
        except IntegrityError:  # the same person, at the same moment, in another request: say which rule it broke
            if Voucher.objects.filter(redeemed_by=by, code=row).exists():
                raise Conflict(_("You have already redeemed this code."), code="voucher_already_redeemed") from None
            raise Conflict(
                _("You already have a voucher of “%(name)s”: one per person.") % {"name": batch.label},
                code="voucher_once_per_person",
            ) from None
        funding = system_account(AccountKind.VOUCHER_FUNDING)
        post(
            Posting(
                kind=TransactionKind.VOUCHER_GRANT,
                idempotency_key=f"voucher:{voucher.public_id}",
                entries=((funding.pk, -batch.amount), (account.pk, batch.amount)),
                user_id=user.pk,
                reason=batch.label,
                reference=display_code(text),
                created_by_id=by.pk,
                at=now,
            )
        )
        voucher.account.refresh_from_db(fields=["balance"])
    return voucher


# --- Expiry -------------------------------------------------------------------------------------------------------


def expire_vouchers(now: datetime | None = None, limit: int = 1000) -> int:
    """Move what is left on every voucher past its date to the operator's account (a ledger transaction). Idempotent."""
    now = now or timezone.now()
    due = list(Voucher.objects.filter(expired_at__isnull=True, expires_at__lte=now).select_related("batch")[:limit])
    for voucher in due:
        _expire(voucher, now)
    return len(due)


def _expire(voucher: Voucher, now: datetime) -> None:
    with transaction.atomic():
        expired = system_account(AccountKind.VOUCHER_EXPIRED)
        locked = lock_accounts([voucher.account_id, expired.pk])
        if not Voucher.objects.filter(pk=voucher.pk, expired_at__isnull=True).update(expired_at=now):
            return
        remaining = locked[voucher.account_id].balance
        if remaining <= 0:
            return
        post(
            Posting(
                kind=TransactionKind.VOUCHER_EXPIRY,
                idempotency_key=f"voucher-expiry:{voucher.public_id}",
                entries=((voucher.account_id, -remaining), (expired.pk, remaining)),
                user_id=voucher.user_id,
                reason=voucher.batch.label,
                at=now,
            ),
            locked=locked,
        )
        arrears.notify(
            voucher.user_id,
            NotificationKind.VOUCHER_EXPIRED,
            name=voucher.batch.name,
            name_zh=voucher.batch.name_zh,
            amount=str(remaining),
        )


# --- Batches (the back office) --------------------------------------------------------------------------------------


def generate_codes(count: int) -> list[str]:
    return ["".join(secrets.choice(CODE_ALPHABET) for _i in range(CODE_LENGTH)) for _n in range(count)]


def create_batch(
    *,
    name,
    name_zh="",
    amount: Decimal,
    expires_at: datetime,
    quantity: int,
    min_spend=ZERO,
    one_per_user=True,
    chips=(),
    zones=(),
    plans=(),
    shared_code="",
    created_by=None,
) -> VoucherBatch:
    """A batch and its codes: ``quantity`` codes of their own, or ``shared_code`` usable ``quantity`` times."""
    if amount is None or amount <= 0:
        raise FieldError("amount", _("A voucher is worth more than zero."), code="invalid_amount")
    if expires_at <= timezone.now():
        raise FieldError("expires_at", _("Choose an expiry in the future."), code="invalid_expiry")
    if not 1 <= quantity <= MAX_CODES_PER_BATCH:
        raise FieldError(
            "quantity",
            _("Between 1 and %(max)s vouchers a batch.") % {"max": MAX_CODES_PER_BATCH},
            code="invalid_quantity",
        )
    shared = normalise_code(shared_code)
    if shared_code and not SHARED_CODE.match(shared):
        raise FieldError("shared_code", _("A shared code has 6 to 32 letters and digits."), code="invalid_code")
    with transaction.atomic():
        if shared and VoucherCode.objects.filter(code=shared).exists():
            raise FieldError("shared_code", _("This code is already in use."), code="code_taken")
        batch = VoucherBatch.objects.create(
            name=name,
            name_zh=name_zh,
            amount=amount,
            expires_at=expires_at,
            quantity=quantity,
            min_spend=min_spend or ZERO,
            one_per_user=one_per_user,
            created_by=created_by,
        )
        batch.chips.set(chips)
        batch.zones.set(zones)
        batch.plans.set(plans)
        if shared:
            try:
                with transaction.atomic():
                    VoucherCode.objects.create(batch=batch, code=shared, uses=quantity)
            except IntegrityError:  # taken at the same moment by another batch
                raise FieldError("shared_code", _("This code is already in use."), code="code_taken") from None
        else:
            codes = set()
            while len(codes) < quantity:
                codes |= set(generate_codes(quantity - len(codes)))
            VoucherCode.objects.bulk_create([VoucherCode(batch=batch, code=c) for c in sorted(codes)])
    return batch


def batch_stats(batches) -> dict[int, dict]:
    """How each batch is used: vouchers redeemed, and the amounts issued, spent, still held and expired unused
    (two grouped queries for the whole page)."""
    ids = [b.pk for b in batches]
    totals = {
        row["batch_id"]: row
        for row in Voucher.objects.filter(batch_id__in=ids)
        .values("batch_id")
        .annotate(redeemed=Count("pk"), issued=Sum("amount"), left=Sum("account__balance"))
    }
    expired = dict(
        LedgerEntry.objects.filter(account__voucher__batch_id__in=ids, transaction__kind=TransactionKind.VOUCHER_EXPIRY)
        .values_list("account__voucher__batch_id")
        .annotate(t=Sum("amount"))
        .values_list("account__voucher__batch_id", "t")
    )
    stats = {}
    for pk in ids:
        row = totals.get(pk, {})
        issued, left, gone = summed(row.get("issued")), summed(row.get("left")), -summed(expired.get(pk))
        stats[pk] = {
            "redeemed": row.get("redeemed", 0),
            "issued": issued,
            "left": left,
            "expired": gone,
            "spent": issued - left - gone,
        }
    return stats
