"""Console pages: the public home, the dashboard, API tokens, health and error pages."""

from pathlib import Path

from csp.decorators import csp_update
from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import RequestDataTooBig, TooManyFieldsSent, TooManyFilesSent
from django.http import Http404, JsonResponse
from django.shortcuts import redirect, render
from django.templatetags.static import static
from django.utils.translation import check_for_language
from django.utils.translation import gettext as _
from django.views import defaults, i18n
from django.views import static as static_files
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from billing.views.wallet import wallet_context
from core.errors import NotFound, ServiceError
from core.htmx import wants_partial
from teams import roles
from teams.context import acting
from teams.models import Membership
from teams.services import team_for_token

from .. import onboarding, services
from ..forms import ApiTokenForm
from ..middleware import API_PREFIXES, OPENAI_PREFIX, is_hub_api
from ..models import ApiToken, User


def home(request):
    return render(request, "accounts/home.html")


@login_required
def dashboard(request):
    # In a team's context the wallet shown is the team's, to the roles that may read it; the others see their own
    # and are told whose wallet the team's launches are paid from.
    working = acting(request)
    team_wallet = working.team is not None and working.can(roles.BILLING)
    context = {
        "active_tokens": ApiToken.objects.filter(user=request.user).active().count(),
        "team_wallet": team_wallet,
    } | wallet_context(working.account if team_wallet else request.user)
    if onboarding.needs_first_steps(request.user, working.account):
        context |= {"first_steps": True, "trial_buys": onboarding.trial_buys(request.user)}
    return render(request, "accounts/dashboard.html", context)


def _token_page(request, form, issued=None, status=200):
    tokens = ApiToken.objects.for_user(request.user).select_related("team").order_by("revoked_at", "-created_at")
    context = {"form": form, "tokens": tokens, "issued": issued}
    template = "accounts/tokens.html#token-panel" if wants_partial(request) else "accounts/tokens.html"
    return render(request, template, context, status=status)


def _token_form(request, data=None) -> ApiTokenForm:
    return ApiTokenForm(
        data, teams=[m.team for m in Membership.objects.filter(user=request.user).select_related("team")]
    )


@login_required
@require_http_methods(["GET", "POST"])
def tokens(request):
    if request.method == "GET":
        return _token_page(request, _token_form(request))
    form = _token_form(request, request.POST)
    if not form.is_valid():
        return _token_page(request, form, status=400)
    try:
        data = form.cleaned_data
        team = team_for_token(request.user, data["team"])
        issued = services.create_api_token(request.user, name=data["name"], scope=data["scope"], team=team)
    except ServiceError as exc:
        form.add_error(None, exc.message)
        return _token_page(request, form, status=400)
    return _token_page(request, _token_form(request), issued=issued)


@login_required
@require_POST
def revoke_token(request, public_id):
    try:
        token = services.revoke_api_token(request.user, public_id)
    except NotFound as exc:
        raise Http404(exc.message) from exc  # someone else's token: the same 404 as a missing one
    except ServiceError as exc:
        messages.error(request, exc.message)
        return redirect("console:tokens") if not wants_partial(request) else _token_page(request, _token_form(request))
    messages.success(request, _("Token “%(name)s” revoked.") % {"name": token.name})
    if wants_partial(request):
        return _token_page(request, _token_form(request))
    return redirect("console:tokens")


@never_cache
@require_GET
def healthz(request):
    report = services.health_report()
    return JsonResponse(report, status=200 if report["status"] == "ok" else 503)


@require_GET
@never_cache
def status_page(request):
    """The service status a person reads (the footer's link): the same checks as /healthz, which stays JSON for
    probes, each named in the page's language."""
    report = services.health_report()
    names = {"database": _("Database"), "broker": _("Task queue"), "worker": _("Background worker")}
    parts = [(names[key], report[key]["ok"]) for key in ("database", "broker", "worker")]
    ok = report["status"] == "ok"
    return render(request, "accounts/status.html", {"parts": parts, "ok": ok}, status=200 if ok else 503)


def _json_error(request, status, code, message):
    """OpenAI's error shape on the /v1 proxy, the Hugging Face Hub's on its API, the API's on /api; None for a
    page."""
    if request.path.startswith(OPENAI_PREFIX):
        kind = "server_error" if status >= 500 else "invalid_request_error"
        return JsonResponse({"error": {"message": str(message), "type": kind, "code": code}}, status=status)
    if is_hub_api(request.path):  # the Hugging Face client reads {"error": …}
        return JsonResponse({"error": str(message)}, status=status)
    if request.path.startswith(API_PREFIXES):
        return JsonResponse({"code": code, "message": str(message)}, status=status)
    return None


def _error(request, status, code, message, template="error.html"):
    """The error in the shape the caller reads: JSON on the API paths, a page in the console's look elsewhere."""
    response = _json_error(request, status, code, message)
    if response is not None:
        return response
    return render(request, template, {"status": status, "message": message}, status=status)


def error_400(request, exception=None):
    if isinstance(exception, RequestDataTooBig | TooManyFieldsSent | TooManyFilesSent):
        # Django refuses a body over DATA_UPLOAD_MAX_MEMORY_SIZE (or with too many fields) before any view runs.
        megabytes = settings.DATA_UPLOAD_MAX_MEMORY_SIZE / (1024 * 1024)
        message = _("The request body is too large: at most %(size)s MB.") % {"size": f"{megabytes:g}"}
        return _error(request, 400, "request_too_large", message)
    return _error(request, 400, "bad_request", _("The request could not be understood."))


def error_403(request, exception=None):
    # A refusal that says why (a team role that does not allow the action) is shown as it is.
    message = str(exception) if exception is not None and str(exception) else ""
    return _error(request, 403, "permission_denied", message or _("You do not have permission to do that."))


def error_404(request, exception=None):
    return _error(request, 404, "not_found", _("Not found."), template="404.html")


def error_500(request):
    message = _("Something went wrong on our side; we have been notified.")
    response = _json_error(request, 500, "server_error", message)
    # The page is 500.html rendered without the request's context: whatever broke (the database, the session)
    # cannot break the error page too.
    return response if response is not None else defaults.server_error(request)


@require_GET
def favicon(request):
    """Browsers ask for /favicon.ico whatever the page links; send them to the SVG."""
    return redirect(static("favicon.svg"))


@require_POST
def set_language(request):
    """Django's language switch, which also keeps a signed-in person's choice: their machines start in it."""
    response = i18n.set_language(request)
    language = request.POST.get("language", "")
    user = request.user
    if user.is_authenticated and check_for_language(language) and language != user.language:
        User.objects.filter(pk=user.pk).update(language=language)
    return response


# The documentation site (MkDocs, Material theme) as `make docs` builds it. Its pages start with a few inline scripts
# (the theme's settings); they show no user content, so only they may run inline scripts and styles.
@require_GET
@csp_update({"script-src": ["'unsafe-inline'"], "style-src": ["'unsafe-inline'"]})
def docs(request, path=""):
    """A file of the built documentation site; a folder's index page; a page saying how to build the site when it
    is not built yet."""
    root = Path(settings.DOCS_SITE_DIR)
    if not (root / "index.html").is_file():
        return render(request, "accounts/docs_missing.html", status=503)
    wanted = (root / path).resolve()
    if not wanted.is_relative_to(root.resolve()):
        raise Http404  # "..", or a link out of the site
    if wanted.is_dir():
        if path and not path.endswith("/"):
            return redirect(f"{request.path}/")
        path = f"{path}index.html"
    return static_files.serve(request, path, document_root=root)
