"""The back-office pages under /ops/. Non-staff get 404 (the back office is not advertised); staff without the
role for a page or action get 403. Views parse a form, call one service, and redirect or re-render."""

import io
from datetime import timedelta

from django.contrib import messages
from django.core.paginator import Paginator
from django.http import Http404, HttpResponse, StreamingHttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.http import url_has_allowed_host_and_scheme, urlencode
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from accounts import verification
from accounts.models import EnterpriseVerification, User
from accounts.ops import roles
from accounts.ops.access import forbidden as _forbidden
from accounts.ops.access import staff_view
from accounts.ops.audit import Actor
from accounts.ops.models import AuditEntry
from billing import einvoice, wallet
from billing import invoices as billing_invoices
from billing import vouchers as billing_vouchers
from billing.display import format_cny
from billing.models import Invoice, LedgerTransaction, Price, VoucherBatch
from core import csvsafe
from core.errors import NotFound, ServiceError
from instances.choices import ACTIVE
from instances.models import Instance
from marketplace.models import HubItem

from . import hub as hub_moderation
from . import images, reports, services
from .forms import (
    AdjustBalanceForm,
    AuditSearchForm,
    BudgetForm,
    MonthForm,
    NodeForm,
    PriceForm,
    ProgrammeForm,
    ReasonForm,
    ReviewForm,
    UserSearchForm,
    VoucherBatchForm,
)

PAGE_SIZE = 50


def _back(request, default: str):
    target = request.POST.get("next") or request.GET.get("next")
    if target and url_has_allowed_host_and_scheme(target, {request.get_host()}, request.is_secure()):
        return redirect(target)
    return redirect(default)


def _act(request, default: str, action, success: str):
    """Run a button's service call: a message either way, then back to the page (403 page if the role lacks it)."""
    try:
        action()
    except roles.Forbidden:
        raise
    except ServiceError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, success)
    return _back(request, default)


def _form_errors(request, form) -> None:
    for errors in form.errors.values():
        for error in errors:
            messages.error(request, error)


def _submit(request, form, page, call, success, done):
    """A back-office form posted: valid, the service is called and the staff member goes to ``done`` with
    ``success(result)`` as a message; invalid or refused by the service, ``page(form, status)`` shows the form again
    with its errors (400). A missing role answers the 403 page."""
    if not form.is_valid():
        return page(form, 400)
    try:
        result = call(form.cleaned_data)
    except roles.Forbidden:
        raise
    except ServiceError as exc:
        field = getattr(exc, "field", None)
        form.add_error(field if field in form.fields else None, exc.message)
        return page(form, 400)
    messages.success(request, success(result))
    return redirect(done)


# --- Home -------------------------------------------------------------------------------------------------------------


@staff_view()
@require_GET
def index(request):
    user = request.user
    context = {
        "roles": roles.roles_of(user),
        "pending_verifications": EnterpriseVerification.objects.pending().count()
        if roles.can(user, roles.REVIEW_ENTERPRISE)
        else None,
        "pending_images": images.pending_count() if roles.can(user, roles.REVIEW_IMAGE) else None,
        "recent_audit": AuditEntry.objects.for_user(user)[:10],
    }
    return render(request, "ops/index.html", context)


# --- Capacity ---------------------------------------------------------------------------------------------------------


@staff_view(roles.MANAGE_CAPACITY)
@require_GET
def capacity(request):
    rows = reports.capacity()
    context = {
        "rows": rows,
        "totals": {
            "cards_total": sum(r.cards_total for r in rows),
            "cards_used": sum(r.cards_used for r in rows),
            "cards_free": sum(r.cards_free for r in rows),
            "cards_drained": sum(r.cards_drained for r in rows),
            "running_instances": sum(r.running_instances for r in rows),
        },
        "nodes": reports.nodes(),
        "series": reports.capacity_series(hours=24),
        "node_form": NodeForm(),
    }
    return render(request, "ops/capacity.html", context)


@staff_view(roles.MANAGE_CAPACITY)
@require_POST
def set_drained(request, zone, name, drained: bool):
    form = NodeForm(request.POST)
    reason = form.cleaned_data["reason"] if form.is_valid() else ""
    success = (
        _("Node %(node)s drained: it takes no new instances.") if drained else _("Node %(node)s is back in service.")
    )
    return _act(
        request,
        reverse("ops:capacity"),
        lambda: services.set_drained(
            Actor.from_request(request), zone_slug=zone, name=name, drained=drained, reason=reason
        ),
        success % {"node": name},
    )


# --- Money ------------------------------------------------------------------------------------------------------------


@staff_view(roles.VIEW_FINANCE)
@require_GET
def revenue(request):
    today = timezone.localdate()
    context = {
        "revenue": reports.revenue(),
        "programmes": reports.subsidy_spend(),
        "month_form": MonthForm(initial={"month": today.replace(day=1)}),
        "this_month": today.strftime("%Y-%m"),
    }
    return render(request, "ops/revenue.html", context)


@staff_view(roles.VIEW_FINANCE)
@require_GET
def reconciliation_csv(request):
    form = MonthForm(request.GET)
    if not form.is_valid():
        messages.error(request, _("Choose a month as YYYY-MM."))
        return redirect("ops:revenue")
    month = form.cleaned_data["month"]
    response = StreamingHttpResponse(reports.reconciliation_csv(month), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="subsidy-reconciliation-{month:%Y-%m}.csv"'
    return response


def _prices_page(request, form, status=200):
    prices = Price.objects.select_related("chip").order_by("chip__sort_order", "chip__slug", "-effective_from")
    context = {
        "form": form,
        "prices": prices[:200],
        "now": timezone.now(),
        "can_edit": roles.can(request.user, roles.MANAGE_PRICES),
    }
    return render(request, "ops/prices.html", context, status=status)


@staff_view(roles.VIEW_FINANCE)
@require_http_methods(["GET", "POST"])
def prices(request):
    if request.method == "GET":
        return _prices_page(
            request, PriceForm(initial={"effective_from": timezone.localtime().replace(second=0, microsecond=0)})
        )
    return _submit(
        request,
        PriceForm(request.POST),
        lambda form, status: _prices_page(request, form, status=status),
        lambda data: services.add_price(
            Actor.from_request(request),
            chip_slug=data["chip"],
            per_hour=data["per_hour"],
            effective_from=data["effective_from"],
            note=data["note"],
        ),
        lambda price: _("Price added: %(price)s. New launches from then on pay it.") % {"price": price},
        "ops:prices",
    )


def _subsidies_page(request, form, status=200):
    context = {
        "form": form,
        "programmes": reports.subsidy_spend(),
        "budget_form": BudgetForm(),
        "can_edit": roles.can(request.user, roles.MANAGE_SUBSIDIES),
    }
    return render(request, "ops/subsidies.html", context, status=status)


@staff_view(roles.VIEW_FINANCE)
@require_http_methods(["GET", "POST"])
def subsidies(request):
    if request.method == "GET":
        return _subsidies_page(
            request, ProgrammeForm(initial={"starts_at": timezone.localtime().replace(second=0, microsecond=0)})
        )
    return _submit(
        request,
        ProgrammeForm(request.POST),
        lambda form, status: _subsidies_page(request, form, status=status),
        lambda data: services.create_programme(Actor.from_request(request), **data),
        lambda programme: _("Programme “%(name)s” created.") % {"name": programme.name},
        "ops:subsidies",
    )


@staff_view(roles.MANAGE_SUBSIDIES)
@require_POST
def set_programme_active(request, slug, active: bool):
    form = ReasonForm(request.POST)
    reason = form.cleaned_data["reason"] if form.is_valid() else ""
    success = _("Programme resumed.") if active else _("Programme paused: prices no longer include its discount.")
    return _act(
        request,
        reverse("ops:subsidies"),
        lambda: services.set_programme_active(Actor.from_request(request), slug=slug, active=active, reason=reason),
        success,
    )


@staff_view(roles.MANAGE_SUBSIDIES)
@require_POST
def change_budget(request, slug):
    form = BudgetForm(request.POST)
    if not form.is_valid():
        _form_errors(request, form)
        return redirect("ops:subsidies")
    return _act(
        request,
        reverse("ops:subsidies"),
        lambda: services.change_budget(Actor.from_request(request), slug=slug, **form.cleaned_data),
        _("Budget changed."),
    )


# --- Reviews ----------------------------------------------------------------------------------------------------------


@staff_view()
@require_GET
def reviews(request):
    user = request.user
    if not (roles.can(user, roles.REVIEW_ENTERPRISE) or roles.can(user, roles.REVIEW_IMAGE)):
        return _forbidden(request)
    context = {"review_form": ReviewForm()}
    if roles.can(user, roles.REVIEW_ENTERPRISE):
        context["pending"] = (
            EnterpriseVerification.objects.pending().select_related("user").order_by("submitted_at")[:PAGE_SIZE]
        )
        context["decided"] = (
            EnterpriseVerification.objects.exclude(status="pending")
            .select_related("user", "reviewed_by")
            .order_by("-reviewed_at")[:20]
        )
    if roles.can(user, roles.REVIEW_IMAGE):
        context["pending_images"] = images.pending()[:PAGE_SIZE]
    return render(request, "ops/reviews.html", context)


def _review(request, public_id, decide, approved: str, rejected: str):
    """One review decision from the queue: ``decide(actor, public_id=, approve=, reason=)``, audited by the service."""
    form = ReviewForm(request.POST)
    if not form.is_valid():
        _form_errors(request, form)
        return redirect("ops:reviews")
    approve = form.cleaned_data["decision"] == "approve"
    reason = form.cleaned_data["reason"]
    return _act(
        request,
        reverse("ops:reviews"),
        lambda: decide(Actor.from_request(request), public_id=public_id, approve=approve, reason=reason),
        approved if approve else rejected,
    )


@staff_view(roles.REVIEW_ENTERPRISE)
@require_POST
def review_verification(request, public_id):
    return _review(
        request,
        public_id,
        services.review_verification,
        _("Application approved."),
        _("Application rejected; the applicant sees your reason."),
    )


@staff_view(roles.REVIEW_IMAGE)
@require_POST
def review_image(request, public_id):
    return _review(
        request,
        public_id,
        images.review,
        _("Image approved: it is listed in the marketplace."),
        _("Image rejected."),
    )


# --- Users ------------------------------------------------------------------------------------------------------------


@staff_view(roles.VIEW_USERS)
@require_GET
def users(request):
    form = UserSearchForm(request.GET)
    # People only: a team's wallet is an internal account of its team, reached from the team, not listed here.
    found = User.objects.filter(team_account__isnull=True).order_by("-date_joined")
    if form.is_valid() and form.cleaned_data["q"]:
        found = found.filter(email__icontains=form.cleaned_data["q"].strip())
    page = Paginator(found, PAGE_SIZE).get_page(request.GET.get("page"))
    return render(request, "ops/users.html", {"form": form, "page": page})


def _user_page(request, user, adjust_form=None, status=200):
    context = {
        "subject": user,
        "subject_roles": roles.roles_of(user) if user.is_staff else [],
        "verification": verification.current(user),
        "wallet": wallet.summary(user),
        "transactions": LedgerTransaction.objects.filter(user=user).order_by("-created_at", "-pk")[:25],
        "instances": Instance.objects.filter(owner=user)
        .select_related("chip", "zone", "plan")
        .order_by("-created_at")[:25],
        "active_states": ACTIVE,
        "adjust_form": adjust_form or AdjustBalanceForm(),
        "stop_form": ReasonForm(),
        "can_adjust": roles.can(request.user, roles.ADJUST_BALANCE),
        "can_stop": roles.can(request.user, roles.FORCE_STOP),
    }
    return render(request, "ops/user_detail.html", context, status=status)


@staff_view(roles.VIEW_USERS)
@require_GET
def user_detail(request, public_id):
    try:
        user = services.get_user(Actor.from_request(request), public_id)
    except ServiceError as exc:
        raise Http404 from exc
    return _user_page(request, user)


@staff_view(roles.ADJUST_BALANCE)
@require_POST
def adjust_balance(request, public_id):
    actor = Actor.from_request(request)
    try:
        user = services.get_user(actor, public_id)
    except ServiceError as exc:
        raise Http404 from exc
    return _submit(
        request,
        AdjustBalanceForm(request.POST),
        lambda form, status: _user_page(request, user, form, status=status),
        lambda data: services.adjust_balance(
            actor,
            user_id=public_id,
            amount=data["amount"],
            reason=data["reason"],
            idempotency_key=data["idempotency_key"],
        ),
        lambda tx: _("Balance adjusted by %(amount)s.") % {"amount": format_cny(tx.user_amount)},
        reverse("ops:user", kwargs={"public_id": public_id}),
    )


@staff_view(roles.FORCE_STOP)
@require_POST
def force_stop(request, public_id):
    form = ReasonForm(request.POST)
    owner = Instance.objects.filter(public_id=public_id).values_list("owner__public_id", flat=True).first()
    if owner is None:
        raise Http404
    default = reverse("ops:user", args=[owner])
    if not form.is_valid():
        _form_errors(request, form)
        return _back(request, default)
    return _act(
        request,
        default,
        lambda: services.force_stop(
            Actor.from_request(request), instance_id=public_id, reason=form.cleaned_data["reason"]
        ),
        _("Stop sent: the instance gets the checkpoint signal, then stops after the grace period."),
    )


# --- The audit log ----------------------------------------------------------------------------------------------------


@staff_view(roles.VIEW_AUDIT)
@require_GET
def audit_log(request):
    form = AuditSearchForm(request.GET)
    entries = AuditEntry.objects.for_user(request.user)
    if form.is_valid():
        entries = entries.search(form.cleaned_data["q"], form.cleaned_data["action"])
    page = Paginator(entries, PAGE_SIZE).get_page(request.GET.get("page"))
    return render(request, "ops/audit.html", {"form": form, "page": page})


# --- Invoices (fapiao) ------------------------------------------------------------------------------------------------


@staff_view(roles.ADJUST_BALANCE)  # finance's: the actions that move or document money
@require_GET
def invoices(request):
    requested = Invoice.objects.filter(status=Invoice.Status.REQUESTED).select_related("user").order_by("requested_at")
    decided = Invoice.objects.exclude(status=Invoice.Status.REQUESTED).select_related("user", "reviewed_by")

    context = {
        "requested": requested[:PAGE_SIZE],
        "decided": decided.order_by("-reviewed_at")[:20],
        "due_reversals": [
            (user, excess, list(Invoice.objects.filter(user=user, status=Invoice.Status.ISSUED)))
            for user, excess in billing_invoices.due_reversals()
        ],
        "this_month": timezone.localdate().strftime("%Y-%m"),
        "einvoice_label": getattr(einvoice.provider(), "label", ""),
    }
    return render(request, "ops/invoices.html", context)


@staff_view(roles.ADJUST_BALANCE)
@require_POST
def invoice_issue_provider(request, public_id):
    try:
        invoice = einvoice.issue_through_provider(Actor.from_request(request), public_id)
    except ServiceError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, _("Invoice %(number)s issued.") % {"number": invoice.number})
    return redirect("ops:invoices")


@staff_view(roles.ADJUST_BALANCE)
@require_POST
def invoice_reverse(request, public_id):
    try:
        number, reason = request.POST.get("number"), request.POST.get("reason")
        invoice = billing_invoices.reverse(Actor.from_request(request), public_id, number=number, reason=reason)
    except ServiceError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, _("Invoice %(number)s reversed.") % {"number": invoice.number})
    return redirect("ops:invoices")


@staff_view(roles.ADJUST_BALANCE)
@require_GET
def invoice_reconciliation_csv(request):
    form = MonthForm(request.GET)
    if not form.is_valid():
        messages.error(request, _("Choose a month as YYYY-MM."))
        return redirect("ops:invoices")
    month = form.cleaned_data["month"]
    out = io.StringIO()
    billing_invoices.reconciliation_csv(month, out)
    response = HttpResponse(out.getvalue(), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="invoice-reconciliation-{month:%Y-%m}.csv"'
    return response


@staff_view(roles.ADJUST_BALANCE)
@require_POST
def invoice_issue(request, public_id):
    try:
        invoice = billing_invoices.issue(
            Actor.from_request(request), public_id, number=request.POST.get("number"), pdf=request.FILES.get("pdf")
        )
    except ServiceError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, _("Invoice %(number)s issued.") % {"number": invoice.number})
    return redirect("ops:invoices")


@staff_view(roles.ADJUST_BALANCE)
@require_POST
def invoice_reject(request, public_id):
    try:
        billing_invoices.reject(Actor.from_request(request), public_id, reason=request.POST.get("reason"))
    except ServiceError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, _("Invoice request rejected; the customer sees why."))
    return redirect("ops:invoices")


# --- Vouchers (代金券) ------------------------------------------------------------------------------------------------


def _vouchers_page(request, form, status=200):
    batches = list(VoucherBatch.objects.prefetch_related("chips", "zones", "plans")[:PAGE_SIZE])
    stats = billing_vouchers.batch_stats(batches)
    context = {
        "form": form,
        "batches": [(b, stats[b.pk], billing_vouchers.describe_cover(b)) for b in batches],
        "can_edit": roles.can(request.user, roles.MANAGE_SUBSIDIES),
    }
    return render(request, "ops/vouchers.html", context, status=status)


@staff_view(roles.VIEW_FINANCE)
@require_http_methods(["GET", "POST"])
def vouchers(request):
    if request.method == "GET":
        expiry = (timezone.localtime() + timedelta(days=30)).replace(second=0, microsecond=0)
        return _vouchers_page(request, VoucherBatchForm(initial={"expires_at": expiry}))
    return _submit(
        request,
        VoucherBatchForm(request.POST),
        lambda form, status: _vouchers_page(request, form, status=status),
        lambda data: services.create_voucher_batch(Actor.from_request(request), **data),
        lambda batch: (
            _("Batch “%(name)s” created with %(count)s vouchers.") % {"name": batch.label, "count": batch.quantity}
        ),
        "ops:vouchers",
    )


@staff_view(roles.MANAGE_SUBSIDIES)
@require_GET
def voucher_codes_csv(request, public_id):
    try:
        batch, rows = services.export_voucher_codes(Actor.from_request(request), public_id)
    except NotFound as exc:
        raise Http404(exc.message) from exc
    out = io.StringIO()
    writer = csvsafe.writer(out)
    writer.writerow(["code", "uses", "redeemed"])
    writer.writerows(rows)
    response = HttpResponse(out.getvalue(), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="vouchers-{batch.public_id}.csv"'
    return response


# --- Hub moderation -------------------------------------------------------------------------------------------------


@staff_view(roles.REVIEW_IMAGE)
@require_GET
def hub_repos(request):
    q = request.GET.get("q", "").strip()[:200]
    items = HubItem.objects.select_related("owner").order_by("-taken_down_at", "-updated_at")
    items = items.filter(repo__icontains=q) if q else items.filter(owner__isnull=False)
    return render(request, "ops/hub.html", {"items": items[:PAGE_SIZE], "q": q, "reason_form": ReasonForm()})


@staff_view(roles.REVIEW_IMAGE)
@require_POST
def hub_repo_takedown(request, public_id):
    try:
        reason = request.POST.get("reason", "")
        item = hub_moderation.take_down_repo(Actor.from_request(request), public_id, reason=reason)
    except NotFound as exc:
        raise Http404(exc.message) from exc
    except ServiceError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, _("%(repo)s taken down.") % {"repo": item.repo})
    return redirect(reverse("ops:hub") + "?" + urlencode({"q": request.POST.get("q", "")}))


@staff_view(roles.REVIEW_IMAGE)
@require_POST
def hub_repo_restore(request, public_id):
    try:
        reason = request.POST.get("reason", "")
        item = hub_moderation.restore_repo(Actor.from_request(request), public_id, reason=reason)
    except NotFound as exc:
        raise Http404(exc.message) from exc
    messages.success(request, _("%(repo)s restored.") % {"repo": item.repo})
    return redirect(reverse("ops:hub") + "?" + urlencode({"q": request.POST.get("q", "")}))
