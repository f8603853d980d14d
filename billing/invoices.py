"""Fapiao (发票): invoices for the money a customer paid, asked for on the console and issued by finance.

What may be invoiced is cash really paid: top-ups, less what was refunded or taken back by a dispute (and given back
when one was won), less what is already invoiced or asked for — never the trial credit, a subsidy or an operator's
adjustment. A general VAT invoice (增值税普通发票) is for a person (a title) or a company (its name and taxpayer ID);
a special one (增值税专用发票) is for verified enterprises only, with the registered address, phone, bank and account.
Finance issues a request in the back office with the number and the PDF the tax system returned, or rejects it with
a reason; the customer downloads the PDF. A person's requests are taken one after the other (a lock on their
wallet's row), so two at once cannot both take the same invoiceable amount.
"""

import re
import uuid
from decimal import Decimal

from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import Sum
from django.utils import timezone
from django.utils.translation import gettext as _

from accounts.ops.audit import Actor, record
from accounts.ops.choices import AuditAction
from core import csvsafe
from core.errors import Conflict, Forbidden, NotFound, ServiceError, Unavailable
from core.field_errors import FieldError

from . import wallet
from .choices import TransactionKind
from .display import format_cny
from .models import Invoice, LedgerTransaction
from .money import ZERO, summed
from .rules import month_bounds

# Cash in by top-up, and cash given back (refunds, disputes, withdrawals; a dispute won comes back in).
PAID_KINDS = (
    TransactionKind.TOPUP,
    TransactionKind.REFUND,
    TransactionKind.DISPUTE,
    TransactionKind.DISPUTE_WON,
    TransactionKind.WITHDRAWAL,
)
MIN_AMOUNT = Decimal("1.00")
TAX_ID = re.compile(r"^[0-9A-Z]{15,20}$")
MAX_PDF_BYTES = 5 * 1024 * 1024


def paid(user) -> Decimal:
    """Cash the customer paid and kept: top-ups less refunds, disputes and withdrawals (plus disputes won)."""
    total = LedgerTransaction.objects.filter(user=user, kind__in=PAID_KINDS).aggregate(t=Sum("user_amount"))["t"]
    return max(summed(total), ZERO)


# What counts as invoiced: asked for or issued (a rejected request, or an invoice cancelled by a red-letter one,
# gives its amount back).
COUNTED = (Invoice.Status.REQUESTED, Invoice.Status.ISSUED)


def invoiced(user) -> Decimal:
    return summed(Invoice.objects.filter(user=user, status__in=COUNTED).aggregate(t=Sum("amount"))["t"])


def issued(user) -> Decimal:
    return summed(Invoice.objects.filter(user=user, status=Invoice.Status.ISSUED).aggregate(t=Sum("amount"))["t"])


def over_invoiced(user) -> Decimal:
    """How much more is issued than was paid and kept (a refund after invoicing): a red-letter reversal (红冲) of
    an issued invoice is due for it. (A refund against a request still waiting is the request's rejection.)"""
    return max(issued(user) - paid(user), ZERO)


def invoiceable(user) -> Decimal:
    return max(paid(user) - invoiced(user), ZERO)


def invoices_of(user):
    return Invoice.objects.filter(user=user)


def get_invoice(user, public_id) -> Invoice:
    invoice = invoices_of(user).filter(public_id=public_id).first() if _uuid(public_id) else None
    if invoice is None:
        raise NotFound(_("No such invoice."))
    return invoice


def _uuid(value) -> bool:
    try:
        uuid.UUID(str(value))
    except ValueError:
        return False
    return True


def _text(value, limit: int) -> str:
    return value.strip()[:limit] if isinstance(value, str) else ""


def check_amount(value) -> Decimal:
    try:
        amount = wallet.parse_amount(value if isinstance(value, str | Decimal | int) else "")
    except ServiceError:
        amount = None
    if amount is None or amount < MIN_AMOUNT:
        raise FieldError("amount", _("Give the amount in yuan, at least 1, e.g. 100 or 99.50."), code="invalid_amount")
    return amount


def check_tax_id(value) -> str:
    tax_id = re.sub(r"\s", "", _text(value, 40)).upper()
    if not TAX_ID.match(tax_id):
        raise FieldError("tax_id", _("A taxpayer ID has 15 to 20 digits and capital letters."), code="invalid_tax_id")
    return tax_id


def request(user, *, kind: str, title, amount, tax_id="", address="", phone="", bank="", bank_account="") -> Invoice:
    """Ask for an invoice of ``amount`` yuan. Refused with what may be invoiced when it is more than that."""
    if kind not in Invoice.Kind.values:
        raise FieldError("kind", _("Choose a general or a special VAT invoice."), code="invalid_kind")
    amount = check_amount(amount)
    fields = {
        "title": _text(title, 200),
        "tax_id": re.sub(r"\s", "", _text(tax_id, 40)).upper(),
        "address": _text(address, 200),
        "phone": _text(phone, 32),
        "bank": _text(bank, 100),
        "bank_account": re.sub(r"\s", "", _text(bank_account, 60)),
    }
    if not fields["title"]:
        raise FieldError("title", _("Give the invoice's title: your name, or the company's."), code="title_required")
    if fields["tax_id"]:
        fields["tax_id"] = check_tax_id(fields["tax_id"])
    if kind == Invoice.Kind.SPECIAL:
        from .subsidies import is_verified_enterprise

        if not is_verified_enterprise(user):
            raise Forbidden(
                _("Special VAT invoices are for verified enterprises: verify your enterprise first."),
                code="enterprise_required",
            )
        for name, label in (
            ("tax_id", _("taxpayer ID")),
            ("address", _("registered address")),
            ("phone", _("phone")),
            ("bank", _("bank")),
            ("bank_account", _("bank account")),
        ):
            if not fields[name]:
                raise FieldError(
                    name, _("A special VAT invoice needs the %(field)s.") % {"field": label}, code="field_required"
                )
    with transaction.atomic():
        # One request of a person at a time: the second sees what the first took.
        get_user_model().objects.select_for_update().filter(pk=user.pk).exists()
        left = invoiceable(user)
        if amount > left:  # what the account has paid does not allow it now: a conflict with its state
            raise Conflict(
                _(
                    "You can ask for an invoice of at most %(left)s: what you paid by top-up, less refunds and what is "
                    "already invoiced (the trial credit and subsidies are not invoiced)."
                )
                % {"left": format_cny(left)},
                code="over_invoiceable",
            )
        return Invoice.objects.create(user=user, kind=kind, amount=amount, **fields)


def _locked_request(public_id) -> Invoice:
    invoice = Invoice.objects.select_for_update().filter(public_id=public_id).first() if _uuid(public_id) else None
    if invoice is None:
        raise NotFound(_("No such invoice."))
    if invoice.status != Invoice.Status.REQUESTED:
        raise Conflict(
            _("This invoice was already %(status)s.") % {"status": invoice.get_status_display().lower()},
            code="already_reviewed",
        )
    return invoice


def requested(public_id) -> Invoice:
    """A request waiting for finance (read, not locked: ``issue`` locks and checks it again)."""
    invoice = Invoice.objects.filter(public_id=public_id).first() if _uuid(public_id) else None
    if invoice is None:
        raise NotFound(_("No such invoice."))
    if invoice.status != Invoice.Status.REQUESTED:
        raise Conflict(
            _("This invoice was already %(status)s.") % {"status": invoice.get_status_display().lower()},
            code="already_reviewed",
        )
    return invoice


def issue(actor: Actor, public_id, *, number, pdf) -> Invoice:
    """Finance issues the request: the number and the PDF the tax system returned. Audited."""
    number = _text(number, 40)
    if not re.fullmatch(r"[0-9A-Za-z-]{8,40}", number):
        raise FieldError("number", _("Give the invoice number (8 to 40 digits or letters)."), code="invalid_number")
    if pdf is None or not getattr(pdf, "size", 0):
        raise FieldError("pdf", _("Attach the invoice's PDF."), code="pdf_required")
    if pdf.size > MAX_PDF_BYTES or not pdf.read(5).startswith(b"%PDF-"):
        raise FieldError("pdf", _("Attach a PDF file of at most 5 MB."), code="invalid_pdf")
    pdf.seek(0)
    with transaction.atomic():
        owner_id = Invoice.objects.filter(public_id=public_id).values_list("user_id", flat=True).first()
        # The customer's row first, as a request takes it: a refund or a request meanwhile is seen.
        get_user_model().objects.select_for_update().filter(pk=owner_id).exists()
        invoice = _locked_request(public_id)
        if invoice.user_id == getattr(actor.user, "pk", None):
            raise Conflict(_("Someone else in finance issues your own invoice."), code="own_invoice")
        if issued(invoice.user) + invoice.amount > paid(invoice.user):
            raise Conflict(
                _(
                    "The customer no longer has %(amount)s of paid money to invoice (a refund came after the request): "
                    "reject it with the reason."
                )
                % {"amount": format_cny(invoice.amount)},
                code="over_invoiceable",
            )
        if Invoice.objects.filter(number=number).exists():
            raise FieldError("number", _("Another invoice has this number."), code="number_taken")
        invoice.number, invoice.status = number, Invoice.Status.ISSUED
        invoice.reviewed_by, invoice.reviewed_at = actor.user, timezone.now()
        try:
            invoice.pdf.save(f"{invoice.public_id}.pdf", pdf, save=False)
        except OSError as exc:
            raise Unavailable(
                _("The PDF could not be stored just now; try again."), code="storage_unavailable"
            ) from exc
        stored = invoice.pdf.name
        try:
            invoice.save()
            record(actor, AuditAction.INVOICE_ISSUED, invoice, after={"number": number, "amount": str(invoice.amount)})
        except Exception:
            invoice.pdf.storage.delete(stored)  # nothing recorded: no file left behind either
            raise
    return invoice


def reject(actor: Actor, public_id, *, reason) -> Invoice:
    reason = _text(reason, 500)
    if not reason:
        raise FieldError("reason", _("Say why, for the customer."), code="reason_required")
    with transaction.atomic():
        invoice = _locked_request(public_id)
        invoice.status, invoice.reason = Invoice.Status.REJECTED, reason
        invoice.reviewed_by, invoice.reviewed_at = actor.user, timezone.now()
        invoice.save()
        record(actor, AuditAction.INVOICE_REJECTED, invoice, after={"reason": reason})
    return invoice


def open_pdf(user, public_id):
    """The issued invoice's PDF for its customer: (invoice, an open file)."""
    invoice = get_invoice(user, public_id)
    if invoice.status not in (Invoice.Status.ISSUED, Invoice.Status.REVERSED) or not invoice.pdf:
        raise Conflict(_("This invoice is not issued yet."), code="not_issued")
    try:
        return invoice, invoice.pdf.open("rb")
    except (FileNotFoundError, OSError) as exc:
        raise Unavailable(
            _("The invoice's PDF cannot be read just now; try again later."), code="pdf_unavailable"
        ) from exc


def reverse(actor: Actor, public_id, *, number, reason) -> Invoice:
    """Finance records the red-letter invoice (红冲) that cancels an issued one, after a refund of invoiced money:
    its amount is no longer counted as invoiced. Audited."""
    number, reason = _text(number, 40), _text(reason, 500)
    if not re.fullmatch(r"[0-9A-Za-z-]{8,40}", number):
        raise FieldError(
            "number", _("Give the red-letter invoice's number (8 to 40 digits or letters)."), code="invalid_number"
        )
    if not reason:
        raise FieldError("reason", _("Say why, for the customer."), code="reason_required")
    with transaction.atomic():
        invoice = Invoice.objects.select_for_update().filter(public_id=public_id).first() if _uuid(public_id) else None
        if invoice is None:
            raise NotFound(_("No such invoice."))
        if invoice.status != Invoice.Status.ISSUED:
            raise Conflict(_("Only an issued invoice can be reversed."), code="not_issued")
        if Invoice.objects.filter(reversal_number=number).exists() or Invoice.objects.filter(number=number).exists():
            raise FieldError("number", _("Another invoice has this number."), code="number_taken")
        invoice.status, invoice.reversal_number, invoice.reason = Invoice.Status.REVERSED, number, reason
        invoice.reversed_at = timezone.now()
        invoice.save(update_fields=["status", "reversal_number", "reason", "reversed_at"])
        record(actor, AuditAction.INVOICE_REVERSED, invoice, after={"reversal_number": number}, reason=reason)
    return invoice


def due_reversals(limit: int = 50) -> list[tuple[object, Decimal]]:
    """Customers with more issued than they paid and kept (a refund came after invoicing), and by how much: two
    grouped queries whatever the number of customers."""
    issued_by = dict(
        Invoice.objects.filter(status=Invoice.Status.ISSUED)
        .values_list("user_id")
        .annotate(total=Sum("amount"))
        .values_list("user_id", "total")
    )
    if not issued_by:
        return []
    kept = dict(
        LedgerTransaction.objects.filter(kind__in=PAID_KINDS, user_id__in=issued_by)
        .values_list("user_id")
        .annotate(total=Sum("user_amount"))
        .values_list("user_id", "total")
    )
    excess = {uid: summed(total) - max(summed(kept.get(uid)), ZERO) for uid, total in issued_by.items()}
    due = sorted((uid for uid, over in excess.items() if over > 0), key=lambda uid: -excess[uid])[:limit]
    users = get_user_model().objects.in_bulk(due)
    return [(users[uid], excess[uid]) for uid in due]


# The finance reconciliation ---------------------------------------------------------------------------------------


def reconciliation_rows(month) -> list[dict]:
    """Per customer, for ``month`` (local): cash paid by top-up, refunded (refunds and disputes, less disputes won),
    invoices issued (less red-letter reversals made) in the month, and what may still be invoiced at its end. The
    paid and refunded columns add up to the ledger's top-up, refund and dispute transactions of the month."""
    start, end = month_bounds(month)
    moves = (
        LedgerTransaction.objects.filter(kind__in=PAID_KINDS, created_at__gte=start, created_at__lt=end)
        .values("user_id", "user__email", "kind")
        .annotate(total=Sum("user_amount"))
    )
    rows: dict[int, dict] = {}

    def row(user_id, email):
        return rows.setdefault(
            user_id,
            {"user_id": user_id, "email": email, "paid": ZERO, "refunded": ZERO, "invoiced": ZERO, "invoiceable": ZERO},
        )

    for move in moves:
        entry = row(move["user_id"], move["user__email"])
        if move["kind"] == TransactionKind.TOPUP:
            entry["paid"] += summed(move["total"])
        else:
            entry["refunded"] -= summed(move["total"])
    issued = (
        Invoice.objects.filter(
            reviewed_at__gte=start, reviewed_at__lt=end, status__in=(Invoice.Status.ISSUED, Invoice.Status.REVERSED)
        )
        .values("user_id", "user__email")
        .annotate(total=Sum("amount"))
    )
    for each in issued:
        row(each["user_id"], each["user__email"])["invoiced"] += summed(each["total"])
    reversed_ = (
        Invoice.objects.filter(reversed_at__gte=start, reversed_at__lt=end)
        .values("user_id", "user__email")
        .annotate(total=Sum("amount"))
    )
    for each in reversed_:
        row(each["user_id"], each["user__email"])["invoiced"] -= summed(each["total"])
    # What may still be invoiced at the month's end: everything paid and kept until then, less what was invoiced
    # (issued, or asked for) until then and not reversed by then.
    kept = dict(
        LedgerTransaction.objects.filter(kind__in=PAID_KINDS, created_at__lt=end, user_id__in=rows)
        .values_list("user_id")
        .annotate(total=Sum("user_amount"))
        .values_list("user_id", "total")
    )
    counted = dict(
        Invoice.objects.filter(user_id__in=rows, requested_at__lt=end)
        .exclude(status=Invoice.Status.REJECTED, reviewed_at__lt=end)
        .exclude(reversed_at__lt=end)
        .values_list("user_id")
        .annotate(total=Sum("amount"))
        .values_list("user_id", "total")
    )
    for user_id, entry in rows.items():
        entry["invoiceable"] = max(summed(kept.get(user_id)) - summed(counted.get(user_id)), ZERO)
    return sorted(rows.values(), key=lambda r: r["email"])


def reconciliation_csv(month, out) -> None:
    writer = csvsafe.writer(out)
    writer.writerow(
        [_("Customer"), _("Paid (CNY)"), _("Refunded (CNY)"), _("Invoiced (CNY)"), _("Invoiceable at month end (CNY)")]
    )
    totals = [ZERO, ZERO, ZERO]
    for row in reconciliation_rows(month):
        writer.writerow([row["email"], row["paid"], row["refunded"], row["invoiced"], row["invoiceable"]])
        totals = [totals[0] + row["paid"], totals[1] + row["refunded"], totals[2] + row["invoiced"]]
    writer.writerow([_("Total"), *totals, ""])
