"""Wallet pages: balance and top-up, transactions, statements, the sandbox checkout and the Stripe webhook."""

import io
import logging
import uuid

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import Http404, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import gettext as _
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from core.errors import NotFound, ServiceError
from core.htmx import wants_partial
from core.paging import BothEnds
from teams import roles
from teams import services as team_services
from teams.context import acting, page_account
from teams.models import TeamEvent
from teams.services import record

from .. import budgets, hourly, payments, statements, vouchers, wallet
from ..arrears import retention_days
from ..display import format_cny
from ..forms import SpendingCapForm, StatementMonthForm, TopUpForm, TransactionFilterForm, VoucherRedeemForm
from ..models import Notification
from ..money import ZERO

log = logging.getLogger(__name__)
PAGE_SIZE = 50
# What a row of billing/partials/transaction_rows.html shows: the rest of each transaction (a dozen columns more) is
# not read.
ROW_FIELDS = ("created_at", "kind", "reference", "minutes", "user_amount", "subsidy_amount")


def chart_data(user, recent: wallet.RecentSpend | None = None) -> dict:
    """The daily spend series for Chart.js: dates and amounts as strings (never floats)."""
    days = wallet.daily_spend(user, recent=recent)
    return {
        "labels": [d.isoformat() for d, _a in days],
        "values": [str(a) for _d, a in days],
        "label": _("Spend (CNY)"),
    }


def wallet_context(user, *, list_vouchers: bool = False) -> dict:
    billing_now, recent = hourly.billing_now(user), wallet.recent_spend(user)
    unread = Notification.objects.filter(user_id=user.pk).unread()[:5] if user.is_authenticated else []
    return {
        "wallet": wallet.summary(user, list_vouchers=list_vouchers, billing_now=billing_now, recent=recent),
        "notifications": list(unread),
        "spend_chart": chart_data(user, recent),
        "billing_now": hourly.describe(billing_now),
        "retention_days": retention_days(),
    }


def _account(request):
    """Whose wallet the pages show: the person's, or in a team's context the team's (its billing permission)."""
    return page_account(request, roles.BILLING)


def _wallet_page(request, *, topup_form=None, cap_form=None, voucher_form=None, status=200, verify_first=False):
    user = _account(request)
    context = wallet_context(user, list_vouchers=True) | {
        "recent": list(statements.filtered_transactions(user).only(*ROW_FIELDS)[:10]),
        "topup_form": topup_form or TopUpForm(initial={"amount": 50}),
        "voucher_form": voucher_form or VoucherRedeemForm(),
        "topup_limits": payments.limits(),
        "sandbox": payments.sandbox_enabled(),
        "verify_first": verify_first,
    }
    summary = context["wallet"]
    context["cap_form"] = cap_form or SpendingCapForm(initial={"spending_cap": summary.spending_cap})
    return render(request, "billing/wallet.html", context, status=status)


@login_required
@require_GET
def wallet_page(request):
    return _wallet_page(request)


@login_required
@require_POST
def topup(request):
    form = TopUpForm(request.POST)
    if not form.is_valid():
        return _wallet_page(request, topup_form=form, status=400)
    try:
        account = _account(request)
        started = payments.start_topup(
            account, form.cleaned_data["amount"], base_url=request.build_absolute_uri("/"), by=request.user
        )
    except ServiceError as exc:
        form.add_error("amount", exc.message)
        return _wallet_page(
            request,
            topup_form=form,
            status=exc.status if exc.status < 500 else 400,
            verify_first=exc.code == "real_name_required",
        )
    record(account, request.user, TeamEvent.Action.TOPUP_STARTED, subject=f"¥{started.amount}")
    return redirect(started.checkout_url)


@login_required
@require_POST
def voucher_redeem(request):
    """Redeem a voucher's code into the wallet the page shows (a team's, in its context)."""
    form = VoucherRedeemForm(request.POST)
    if not form.is_valid():
        return _wallet_page(request, voucher_form=form, status=400)
    try:
        account = _account(request)
        voucher = vouchers.redeem(account, form.cleaned_data["code"], by=request.user)
    except ServiceError as exc:
        form.add_error("code", exc.message)
        return _wallet_page(request, voucher_form=form, status=exc.status if exc.status < 500 else 400)
    record(account, request.user, TeamEvent.Action.VOUCHER_REDEEMED, subject=f"¥{voucher.amount}")
    messages.success(
        request,
        _("Voucher “%(name)s” of %(amount)s added; it expires on %(date)s.")
        % {
            "name": voucher.batch.label,
            "amount": format_cny(voucher.amount),
            "date": timezone.localtime(voucher.expires_at).strftime("%Y-%m-%d"),
        },
    )
    return redirect(reverse("billing:wallet") + "#vouchers")


@login_required
@require_POST
def spending_cap(request):
    form = SpendingCapForm(request.POST)
    if not form.is_valid():
        return _wallet_page(request, cap_form=form, status=400)
    try:
        wallet.set_spending_cap(_account(request), form.cleaned_data["spending_cap"])
    except ServiceError as exc:
        form.add_error("spending_cap", exc.message)
        return _wallet_page(request, cap_form=form, status=400)
    messages.success(request, _("Spending cap saved."))
    return redirect("billing:wallet")


def _filtered(request, filters: dict):
    return statements.filtered_transactions(_account(request), **filters)


@login_required
@require_GET
def transactions(request):
    form = TransactionFilterForm(request.GET or None)
    cleaned = form.cleaned_data if request.GET and form.is_valid() else {}
    filters = {k: v for k, v in cleaned.items() if v}
    if request.GET.get("format") == "csv" and not form.errors:
        out = io.StringIO()
        statements.transactions_csv(_filtered(request, filters), out)
        response = HttpResponse(out.getvalue(), content_type="text/csv; charset=utf-8")
        response["Content-Disposition"] = 'attachment; filename="transactions.csv"'
        return response
    listing = BothEnds(_filtered(request, filters).only(*ROW_FIELDS))
    page = Paginator(listing, PAGE_SIZE).get_page(request.GET.get("page"))
    query = request.GET.copy()
    query.pop("page", None)
    context = {"form": form, "page": page, "transactions": page.object_list, "query": query.urlencode()}
    template = "billing/transactions.html#transaction-table" if wants_partial(request) else "billing/transactions.html"
    return render(request, template, context, status=400 if request.GET and form.errors else 200)


@login_required
@require_GET
def statement(request):
    form = StatementMonthForm(request.GET or None)
    if form.is_bound and not form.is_valid():
        month = statements.parse_month(None)
        status = 400
    else:
        month = statements.parse_month(form.cleaned_data.get("month") if form.is_bound else None)
        status = 200
    if request.GET.get("format") == "csv" and status == 200:
        result = statements.month_statement(_account(request), month)
        out = io.StringIO()
        statements.statement_csv(result, out)
        response = HttpResponse(out.getvalue(), content_type="text/csv; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="statement-{month:%Y-%m}.csv"'
        return response
    page, result = statements.statement_page(_account(request), month, request.GET.get("page"), PAGE_SIZE)
    context = {"form": form, "statement": result, "page": page, "month_value": f"{month:%Y-%m}"}
    return render(request, "billing/statements.html", context, status=status)


def _team_context(request):
    """The team context with the billing permission, or 404 in the personal one (a person has no members)."""
    context = acting(request)
    if context.team is None:
        raise Http404(_("Work in a team to see its members' spending."))
    _account(request)
    return context


@login_required
@require_GET
def members(request):
    """The team's members: each one's monthly budget (set here), what they spent of the team's wallet this month
    and what is left."""
    context = _team_context(request)
    return _members_page(request, context)


def _members_page(request, context, *, error_for=None, error="", status=200):
    team = context.team
    rows = list(team.memberships.select_related("user").order_by("joined_at", "id"))
    spent = budgets.spent(team.account_id, [m.user_id for m in rows])
    for row in rows:
        row.spent = spent.get(row.user_id, ZERO)
        row.left = None if row.monthly_budget is None else max(row.monthly_budget - row.spent, ZERO)
        row.error = error if row.user_id == error_for else ""
    page = {"team": team, "rows": rows, "month": timezone.localdate().replace(day=1)}
    return render(request, "billing/members.html", page, status=status)


@login_required
@require_POST
def member_budget(request, user_id):
    context = _team_context(request)
    try:
        changed = team_services.set_budget(context.membership, user_id, request.POST.get("monthly_budget", ""))
    except NotFound as exc:
        raise Http404(str(exc.message)) from exc
    except ServiceError as exc:
        target = context.team.memberships.filter(user__public_id=user_id).values_list("user_id", flat=True).first()
        return _members_page(request, context, error_for=target, error=str(exc.message), status=400)
    messages.success(request, _("Budget of %(email)s saved.") % {"email": changed.user.email})
    return redirect("billing:members")


def _topup_or_404(request):
    try:
        public_id = uuid.UUID(request.GET.get("topup") or "")
        return payments.get_topup(_account(request), public_id)
    except (NotFound, ValueError) as exc:  # a malformed id is a missing top-up too
        raise Http404 from exc


@login_required
@require_GET
def topup_success(request):
    topup = _topup_or_404(request)
    return render(request, "billing/topup_result.html", {"topup": topup, "outcome": "success"})


@login_required
@require_http_methods(["GET", "POST"])
def topup_cancel(request):
    """Where the checkout sends the browser back when the user turns back. Opening it only shows the top-up (with a
    button to cancel it while it is pending); cancelling is a POST, so no link or prefetch changes anything."""
    topup = _topup_or_404(request)
    if request.method == "POST":
        payments.cancel_topup(_account(request), topup.public_id)
        return redirect(f"{reverse('billing:topup-cancel')}?topup={topup.public_id}")
    return render(request, "billing/topup_result.html", {"topup": topup, "outcome": "cancel"})


@login_required
@require_http_methods(["GET", "POST"])
def sandbox_checkout(request, public_id):
    if not payments.sandbox_enabled():
        raise Http404
    try:
        topup = payments.get_topup(_account(request), public_id)
    except NotFound as exc:
        raise Http404 from exc
    if not topup.is_sandbox:
        raise Http404
    if request.method == "POST":
        if request.POST.get("action") == "cancel":
            payments.cancel_topup(_account(request), public_id)
            return redirect(f"{reverse('billing:topup-cancel')}?topup={public_id}")
        try:
            payments.pay_sandbox(_account(request), public_id)
        except ServiceError as exc:
            return render(request, "billing/sandbox_checkout.html", {"topup": topup, "error": exc.message}, status=400)
        return redirect(f"{reverse('billing:topup-success')}?topup={public_id}")
    return render(request, "billing/sandbox_checkout.html", {"topup": topup})


@csrf_exempt
@require_POST
def stripe_webhook(request):
    """Stripe's deliveries: 400 for a bad signature (nothing credited), 503 to make Stripe retry later."""
    try:
        outcome = payments.handle_webhook(request.body, request.headers.get("Stripe-Signature", ""))
    except ServiceError as exc:
        status = exc.status if exc.status >= 500 else 400
        return JsonResponse({"code": exc.code, "message": str(exc.message)}, status=status)
    log.info("stripe webhook: %s", outcome)
    return JsonResponse({"received": True, "outcome": outcome})
