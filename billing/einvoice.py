"""Where an e-invoice service (电子发票) plugs in: finance issues a request through it instead of by hand.

A provider is a class named by ``EINVOICE_PROVIDER`` (a dotted path) with a ``label`` and ``issue(invoice)``, which
asks the tax service for the fapiao and returns its number and PDF. ``billing.invoices.issue`` then records them
exactly as when finance types the number and uploads the PDF (the same checks, the same audit entry). Without a
provider, finance issues by hand. ``SimulatedProvider`` is the development one: its PDFs say SIMULATED and carry no
tax value, and it is refused in production.
"""

from dataclasses import dataclass

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.core.files.base import ContentFile
from django.utils import timezone
from django.utils.module_loading import import_string
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from accounts.ops.audit import Actor
from core.errors import ServiceError, Unavailable

from . import invoices
from .models import Invoice


@dataclass(frozen=True)
class Issued:
    number: str
    pdf: bytes


class ProviderError(Exception):
    """The service refused or could not be reached; its message is shown to finance."""


def provider():
    """The configured provider, or None (finance issues by hand)."""
    path = settings.EINVOICE_PROVIDER
    if not path:
        return None
    try:
        return import_string(path)()
    except ImportError as exc:
        raise ImproperlyConfigured(f"EINVOICE_PROVIDER={path!r} cannot be imported: {exc}") from exc


def issue_through_provider(actor: Actor, public_id) -> Invoice:
    """Issue a request through the e-invoice service and record its number and PDF. Audited like a manual issue."""
    service = provider()
    if service is None:
        raise ServiceError(_("No e-invoice service is configured: issue it by hand."), code="no_einvoice_provider")
    invoice = invoices.requested(public_id)
    try:
        issued = service.issue(invoice)
    except ProviderError as exc:
        raise Unavailable(
            _("The e-invoice service did not issue it: %(why)s") % {"why": exc}, code="einvoice_failed"
        ) from exc
    return invoices.issue(actor, public_id, number=issued.number, pdf=ContentFile(issued.pdf, name="fapiao.pdf"))


class SimulatedProvider:
    """Development only: a PDF that says SIMULATED, numbered SIM-…; nothing is sent to any tax system."""

    label = gettext_lazy("Simulated e-invoice service (development, no tax value)")

    def __init__(self):
        if getattr(settings, "PRODUCTION", False):
            raise ImproperlyConfigured("The simulated e-invoice service cannot run in production.")

    def issue(self, invoice: Invoice) -> Issued:
        number = f"SIM-{timezone.localdate():%Y%m%d}-{invoice.pk:08d}"
        lines = [
            "SIMULATED FAPIAO - NOT A REAL INVOICE",
            f"Number: {number}",
            f"Amount: CNY {invoice.amount}",
            f"Kind: {invoice.kind}",
        ]
        return Issued(number=number, pdf=_text_pdf(lines))


def _text_pdf(lines: list[str]) -> bytes:
    """A one-page PDF of ASCII text lines (for the simulated service; a real one returns the tax system's PDF)."""
    text = "".join(
        f"BT /F1 14 Tf 72 {760 - 24 * i} Td ({line.replace(chr(92), '').replace('(', '[').replace(')', ']')}) Tj ET\n"
        for i, line in enumerate(lines)
    ).encode("ascii", "replace")
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n" % len(text) + text + b"endstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out, offsets = b"%PDF-1.4\n", []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return out
