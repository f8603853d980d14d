"""Every staff action in the back office. Each one checks the actor's role, changes state through the owning app's
service (the ledger, the instance state machine, …) and writes its audit row in the same database transaction.

The ops pages, the admin and tests all call these functions; none of them changes the rows another way.
"""

import uuid
from datetime import datetime
from decimal import Decimal, InvalidOperation

from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from accounts import verification
from accounts.models import EnterpriseVerification, User
from accounts.ops import roles
from accounts.ops.audit import Actor, Target, record
from accounts.ops.choices import AuditAction
from billing import price_version, vouchers, wallet
from billing.choices import Eligibility
from billing.display import format_cny
from billing.models import LedgerTransaction, Price, SubsidyProgramme, VoucherBatch
from billing.money import CENT, RATE_QUANTUM, ZERO
from catalog.models import Chip, Node
from core.errors import Conflict, NotFound, ServiceError
from instances import lifecycle
from instances.choices import Reason
from instances.models import Instance

MAX_ADJUSTMENT = Decimal("1000000")
MAX_PRICE_PER_HOUR = Decimal("100000")
MAX_BUDGET = Decimal("1000000000")
MAX_REASON = 500


def _reason(reason: str, *, required: bool = True) -> str:
    reason = (reason or "").strip()
    if required and not reason:
        raise ServiceError(_("Give a reason: it is kept in the audit log."), code="reason_required")
    if len(reason) > MAX_REASON:
        raise ServiceError(_("At most %(n)d characters, please.") % {"n": MAX_REASON}, code="reason_too_long")
    return reason


def _decimal(value, *, message: str, code: str) -> Decimal:
    try:
        number = Decimal(str(value).strip())
    except (InvalidOperation, ValueError, TypeError):
        raise ServiceError(message, code=code) from None
    if not number.is_finite():
        raise ServiceError(message, code=code)
    return number


# --- Users ------------------------------------------------------------------------------------------------------------


def get_user(actor: Actor, public_id) -> User:
    roles.require(actor.user, roles.VIEW_USERS)
    user = User.objects.filter(public_id=public_id).first()
    if user is None:
        raise NotFound(_("No such user."))
    return user


def adjust_balance(actor: Actor, *, user_id, amount, reason: str, idempotency_key: str) -> LedgerTransaction:
    """Credit (positive) or debit (negative) a user's cash through the ledger, with a mandatory reason, audited.

    ``idempotency_key`` comes from the form that was shown, so a double submit posts once and audits once.
    """
    roles.require(actor.user, roles.ADJUST_BALANCE)
    user = get_user(actor, user_id)
    reason = _reason(reason)
    amount = wallet.parse_amount(amount)
    if abs(amount) > MAX_ADJUSTMENT:
        raise ServiceError(
            _("An adjustment can be at most ¥%(max)s either way.") % {"max": MAX_ADJUSTMENT}, code="invalid_amount"
        )
    try:
        key = f"ops-adjust:{uuid.UUID(str(idempotency_key))}"
    except ValueError:
        raise ServiceError(_("The form expired; reload the page and try again."), code="invalid_form") from None
    with transaction.atomic():
        done = LedgerTransaction.objects.filter(idempotency_key=key).first()
        if done is not None:
            return done  # a repeated submit: posted and audited the first time
        before = wallet.summary(user)
        tx = wallet.adjust_balance(user=user, amount=amount, reason=reason, staff=actor.user, idempotency_key=key)
        record(
            actor,
            AuditAction.BALANCE_ADJUSTED,
            user,
            reason=reason,
            before={"cash": before.cash},
            after={"cash": before.cash + amount, "amount": amount, "transaction": str(tx.public_id)},
        )
    return tx


# --- Instances --------------------------------------------------------------------------------------------------------


def force_stop(actor: Actor, *, instance_id, reason: str) -> Instance:
    """Stop any user's instance through the instances stop service: the checkpoint signal, then the stop after
    the grace period; billing stops now. Audited with the reason."""
    roles.require(actor.user, roles.FORCE_STOP)
    reason = _reason(reason)
    instance = Instance.objects.with_related().select_related("owner").filter(public_id=instance_id).first()
    if instance is None:
        raise NotFound(_("No such instance."))
    before = {"status": instance.status, "wanted": instance.wanted}
    detail = _("Stopped by the operator: %(reason)s") % {"reason": reason}
    with transaction.atomic():
        lifecycle.stop(instance, reason=Reason.STOP_REQUESTED, detail=detail)
        record(
            actor,
            AuditAction.INSTANCE_FORCE_STOPPED,
            instance,
            reason=reason,
            before=before,
            after={"status": instance.status, "wanted": instance.wanted, "owner": instance.owner.email},
        )
    return instance


# --- Capacity ---------------------------------------------------------------------------------------------------------


def get_node(zone_slug: str, name: str) -> Node:
    node = Node.objects.select_related("zone", "chip").filter(zone__slug=zone_slug, name=name).first()
    if node is None:
        raise NotFound(_("No such node."))
    return node


def set_drained(actor: Actor, *, zone_slug: str, name: str, drained: bool, reason: str = "") -> Node:
    """Drain a node (it takes no new instances; running ones stay) or return it to service. Compare-and-set."""
    roles.require(actor.user, roles.MANAGE_CAPACITY)
    reason = _reason(reason, required=False)
    node = get_node(zone_slug, name)
    with transaction.atomic():
        if not Node.objects.filter(pk=node.pk, drained=not drained).update(drained=drained):
            message = _("Node %(node)s is already drained.") if drained else _("Node %(node)s is already in service.")
            raise Conflict(message % {"node": node.name}, code="node_unchanged")
        price_version.bump()  # where chips are offered changes what quotes name
        node.drained = drained
        action = AuditAction.NODE_DRAINED if drained else AuditAction.NODE_RETURNED
        record(
            actor,
            action,
            Target("node", f"{node.zone.slug}/{node.name}", str(node)),
            reason=reason,
            before={"drained": not drained, "cards_reserved": node.cards_reserved},
            after={"drained": drained},
        )
    return node


# --- Prices -----------------------------------------------------------------------------------------------------------


def add_price(actor: Actor, *, chip_slug: str, per_hour, effective_from: datetime, note: str = "") -> Price:
    """Add a list price from ``effective_from`` (now or later). Quotes from then on use it, so new launches pay
    it; running runs keep the rate frozen in their usage session when they started."""
    roles.require(actor.user, roles.MANAGE_PRICES)
    chip = None
    if chip_slug:
        chip = Chip.objects.filter(slug=chip_slug, rentable=True).first()
        if chip is None:
            raise ServiceError(_("Choose a chip from the list."), code="invalid_chip")
    rate = _decimal(per_hour, message=_("The price must be a number of yuan, e.g. 4.80."), code="invalid_price")
    if rate < 0 or rate > MAX_PRICE_PER_HOUR or rate.quantize(RATE_QUANTUM) != rate:
        raise ServiceError(
            _("The price must be between ¥0 and ¥%(max)s per hour, with at most six decimal places.")
            % {"max": MAX_PRICE_PER_HOUR},
            code="invalid_price",
        )
    now = timezone.now()
    if effective_from is None or effective_from < now.replace(second=0, microsecond=0):
        raise ServiceError(
            _("A new price takes effect now or later: prices already in force are history and are not rewritten."),
            code="effective_in_past",
        )
    note = _reason(note, required=False)[:200]
    current = Price.objects.effective_at(now).filter(chip=chip).first()
    try:
        with transaction.atomic():
            price = Price.objects.create(chip=chip, per_hour=rate, effective_from=effective_from, note=note)
            record(
                actor,
                AuditAction.PRICE_ADDED,
                Target("price", chip.slug if chip else "no-card", str(price)),
                reason=note,
                before={"per_hour": current.per_hour if current else None},
                after={"per_hour": rate, "effective_from": effective_from},
            )
    except IntegrityError:
        raise Conflict(
            _("There is already a price for this chip from that moment; pick another time."), code="price_exists"
        ) from None
    return price


# --- Subsidy programmes -----------------------------------------------------------------------------------------------


def _programme(slug: str) -> SubsidyProgramme:
    programme = SubsidyProgramme.objects.filter(slug=slug).first()
    if programme is None:
        raise NotFound(_("No such subsidy programme."))
    return programme


def _budget(value) -> Decimal | None:
    if value in (None, ""):
        return None
    budget = _decimal(value, message=_("The budget must be a number of yuan."), code="invalid_budget")
    if budget < 0 or budget > MAX_BUDGET or budget.quantize(CENT) != budget:
        raise ServiceError(
            _("The budget must be between ¥0 and ¥%(max)s, in fen.") % {"max": MAX_BUDGET}, code="invalid_budget"
        )
    return budget.quantize(CENT)


def _terms(programme: SubsidyProgramme) -> dict:
    return {
        "rate": programme.rate,
        "budget": programme.budget,
        "spent": programme.spent,
        "active": programme.active,
        "starts_at": programme.starts_at,
        "ends_at": programme.ends_at,
        "eligibility": programme.eligibility,
        "monthly_cap_per_user": programme.monthly_cap_per_user,
    }


def create_programme(
    actor: Actor,
    *,
    slug: str,
    name: str,
    name_zh: str,
    rate,
    starts_at,
    ends_at=None,
    budget=None,
    monthly_cap_per_user=None,
    eligibility: str = Eligibility.EVERYONE,
    chips=(),
    zones=(),
    reason: str = "",
) -> SubsidyProgramme:
    """Create a subsidy programme. Prices shown change at once for the chips and zones it covers."""
    roles.require(actor.user, roles.MANAGE_SUBSIDIES)
    rate = _decimal(rate, message=_("The rate must be a fraction such as 0.10."), code="invalid_rate")
    if not ZERO < rate <= 1 or rate.quantize(Decimal("0.0001")) != rate:
        raise ServiceError(_("The rate must be above 0 and at most 1, e.g. 0.10 for 10%."), code="invalid_rate")
    if eligibility not in Eligibility.values:
        raise ServiceError(_("Choose who is eligible."), code="invalid_eligibility")
    if starts_at is None:
        raise ServiceError(_("Give the start of the programme."), code="invalid_dates")
    if ends_at is not None and ends_at <= starts_at:
        raise ServiceError(_("The programme must end after it starts."), code="invalid_dates")
    if not slug or not name:
        raise ServiceError(_("Give the programme a short name (slug) and a name."), code="name_required")
    programme = SubsidyProgramme(
        slug=slug,
        name=name,
        name_zh=name_zh or name,
        rate=rate,
        starts_at=starts_at,
        ends_at=ends_at,
        budget=_budget(budget),
        monthly_cap_per_user=_budget(monthly_cap_per_user),
        eligibility=eligibility,
    )
    try:
        with transaction.atomic():
            programme.save()
            programme.chips.set(chips)
            programme.zones.set(zones)
            where = {"chips": [c.slug for c in chips], "zones": [z.slug for z in zones]}
            record(
                actor,
                AuditAction.PROGRAMME_CREATED,
                programme,
                reason=_reason(reason, required=False),
                after=_terms(programme) | where,
            )
    except IntegrityError:
        raise Conflict(_("A programme with this short name exists already."), code="programme_exists") from None
    return programme


def set_programme_active(actor: Actor, *, slug: str, active: bool, reason: str) -> SubsidyProgramme:
    """Pause a programme (its discount disappears from prices at once) or resume it."""
    roles.require(actor.user, roles.MANAGE_SUBSIDIES)
    reason = _reason(reason)
    programme = _programme(slug)
    with transaction.atomic():
        if not SubsidyProgramme.objects.filter(pk=programme.pk, active=not active).update(active=active):
            message = _("The programme is already running.") if active else _("The programme is already paused.")
            raise Conflict(message, code="programme_unchanged")
        price_version.bump()  # an update() sends no signal: quotes must see the programme come and go at once
        action = AuditAction.PROGRAMME_RESUMED if active else AuditAction.PROGRAMME_PAUSED
        record(actor, action, programme, reason=reason, before={"active": not active}, after={"active": active})
    programme.active = active
    return programme


def change_budget(actor: Actor, *, slug: str, budget, reason: str) -> SubsidyProgramme:
    """Set a programme's total budget (empty: no limit). It cannot go below what was already spent."""
    roles.require(actor.user, roles.MANAGE_SUBSIDIES)
    reason = _reason(reason)
    new = _budget(budget)
    with transaction.atomic():
        # Locked, so a metering tick booking subsidy cannot slip between the check and the change.
        programme = SubsidyProgramme.objects.select_for_update().filter(slug=slug).first()
        if programme is None:
            raise NotFound(_("No such subsidy programme."))
        if new is not None and new < programme.spent:
            raise ServiceError(
                _("The budget cannot be below what was already spent (%(spent)s).")
                % {"spent": format_cny(programme.spent)},
                code="budget_below_spent",
            )
        old = programme.budget
        SubsidyProgramme.objects.filter(pk=programme.pk).update(budget=new)
        price_version.bump()  # the shared price book keeps each programme's budget
        programme.budget = new
        record(
            actor,
            AuditAction.PROGRAMME_BUDGET_CHANGED,
            programme,
            reason=reason,
            before={"budget": old, "spent": programme.spent},
            after={"budget": new},
        )
    return programme


# --- Reviews ----------------------------------------------------------------------------------------------------------


def review_verification(actor: Actor, *, public_id, approve: bool, reason: str = "") -> EnterpriseVerification:
    """Approve or reject an enterprise verification; a rejection needs a reason, which the applicant sees."""
    roles.require(actor.user, roles.REVIEW_ENTERPRISE)
    application = verification.get_for_review(public_id)
    before = {"status": application.status}
    with transaction.atomic():
        if approve:
            verification.approve(application, by=actor.user, reason=reason)
        else:
            verification.reject(application, by=actor.user, reason=reason)
        action = AuditAction.VERIFICATION_APPROVED if approve else AuditAction.VERIFICATION_REJECTED
        record(
            actor,
            action,
            application,
            reason=application.reason,
            before=before,
            after={"status": application.status, "user": application.user.email, "company": application.company_name},
        )
    return application


# --- Vouchers ---------------------------------------------------------------------------------------------------------


def create_voucher_batch(actor: Actor, *, reason: str = "", **fields) -> VoucherBatch:
    """Create a batch of vouchers and its codes (``billing.vouchers.create_batch``), audited."""
    roles.require(actor.user, roles.MANAGE_SUBSIDIES)
    with transaction.atomic():
        batch = vouchers.create_batch(created_by=actor.user, **fields)
        terms = {
            "amount": str(batch.amount),
            "quantity": batch.quantity,
            "expires_at": batch.expires_at.isoformat(),
            "min_spend": str(batch.min_spend),
            "one_per_user": batch.one_per_user,
            "chips": [c.slug for c in fields.get("chips") or ()],
            "zones": [z.slug for z in fields.get("zones") or ()],
            "plans": [p.slug for p in fields.get("plans") or ()],
            "shared_code": bool(fields.get("shared_code")),
        }
        record(actor, AuditAction.VOUCHER_BATCH_CREATED, batch, reason=_reason(reason, required=False), after=terms)
    return batch


def export_voucher_codes(actor: Actor, public_id) -> tuple[VoucherBatch, list[tuple[str, int, int]]]:
    """A batch's codes with their uses and redemptions, for printing or mailing; who exported them is audited."""
    roles.require(actor.user, roles.MANAGE_SUBSIDIES)
    batch = VoucherBatch.objects.filter(public_id=public_id).first()
    if batch is None:
        raise NotFound(_("No such voucher batch."))
    rows = [(vouchers.display_code(c.code), c.uses, c.redeemed) for c in batch.codes.order_by("pk")]
    record(actor, AuditAction.VOUCHER_CODES_EXPORTED, batch, after={"codes": len(rows)})
    return batch, rows
