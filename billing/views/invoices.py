"""The invoices page (/billing/invoices/): what may be invoiced, the request form, the requests and their PDFs."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import FileResponse, Http404
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_http_methods

from core.errors import NotFound, ServiceError
from core.field_errors import FieldError

from .. import invoices
from ..display import format_cny
from ..forms import InvoiceRequestForm
from .wallet import _account


def _page(request, account, form, status=200):
    context = {
        "form": form,
        "invoiceable": invoices.invoiceable(account),
        "paid": invoices.paid(account),
        "invoices": list(invoices.invoices_of(account)[:50]),
    }
    return render(request, "billing/invoices.html", context, status=status)


@login_required
@require_http_methods(["GET", "POST"])
def invoice_list(request):
    account = _account(request)  # a team's invoices: its billing roles
    if request.method == "GET":
        return _page(request, account, InvoiceRequestForm())
    form = InvoiceRequestForm(request.POST)
    if not form.is_valid():
        return _page(request, account, form, status=400)
    try:
        invoice = invoices.request(account, **form.cleaned_data)
    except ServiceError as exc:
        form.add_error(exc.field if isinstance(exc, FieldError) and exc.field in form.fields else None, exc.message)
        return _page(request, account, form, status=exc.status)
    messages.success(
        request,
        _("Invoice of %(amount)s requested: finance issues it within two working days.")
        % {"amount": format_cny(invoice.amount)},
    )
    return redirect("billing:invoices")


@login_required
@require_GET
def invoice_pdf(request, public_id):
    try:
        invoice, handle = invoices.open_pdf(_account(request), public_id)
    except NotFound as exc:
        raise Http404(exc.message) from exc
    except ServiceError as exc:
        messages.error(request, exc.message)
        return redirect("billing:invoices")
    return FileResponse(
        handle, as_attachment=True, filename=f"fapiao-{invoice.number}.pdf", content_type="application/pdf"
    )
