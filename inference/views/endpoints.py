"""Endpoint pages: the list, deploy, an endpoint's page (status, keys, examples, request chart) and its actions."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from billing.quote import load_price_book
from core.errors import Forbidden, NotFound, ServiceError
from core.htmx import wants_partial
from inference import template_catalog as inference
from instances import costs, lifecycle
from instances.backends import get_backend
from instances.models import Instance
from teams import roles
from teams.context import page_account
from teams.models import TeamEvent
from teams.services import record

from .. import services as endpoints

DETAIL = "inference/detail.html"
NEW_KEY_SESSION = "endpoints:new-key"


@login_required
@require_GET
def endpoint_list(request):
    return render(request, "inference/list.html", {"endpoints": endpoints.endpoint_rows(page_account(request))})


def _template_or_404(slug):
    try:
        return inference.get_template(slug)
    except NotFound as exc:
        raise Http404(exc.message) from exc


def _idle_minutes(value):
    value = (value or "").strip()
    if not value:
        return None
    try:
        return int(value)
    except ValueError:
        raise ServiceError(_("Idle minutes must be a whole number."), code="invalid_idle_minutes") from None


@login_required
@require_http_methods(["GET", "POST"])
def deploy(request, slug):
    """GET: choose a chip (cheapest compatible first) and scale-to-zero; POST: deploy and go to the endpoint."""
    template = _template_or_404(slug)
    error, status, verify_first = "", 200, False
    account = page_account(request, roles.OPERATE if request.method == "POST" else roles.VIEW)
    if request.method == "POST":
        try:
            endpoint = endpoints.deploy(
                account,
                endpoints.DeployRequest(
                    template=slug,
                    chip=request.POST.get("chip", ""),
                    name=request.POST.get("name", ""),
                    idle_stop_minutes=_idle_minutes(request.POST.get("idle_stop_minutes")),
                ),
                by=request.user,
            )
        except ServiceError as exc:
            error, status = str(exc.message), 400 if exc.status < 500 else exc.status
            verify_first = exc.code == "real_name_required"
            if verify_first:
                status = exc.status  # 403, as the other pages refuse it
        else:
            record(endpoint.instance, request.user, TeamEvent.Action.LAUNCHED, subject=endpoint.instance.name)
            return redirect(endpoint)
    refusal = inference.card_refusal(template)
    if refusal and not error:
        error = refusal  # said before the form is filled in, as the deploy itself would say it
    offers = inference.offers(template, load_price_book(user=account, person=request.user), user=account)
    context = {
        "refused": bool(refusal),
        "template": template,
        "offers": offers,
        "error": error,
        "verify_first": verify_first,
        "form_data": request.POST,
        "kind": Instance.Kind.ENDPOINT.label,
    }
    return render(request, "inference/deploy.html", context, status=status)


def _context(request, endpoint, **extra) -> dict:
    instance = endpoint.instance
    url = request.build_absolute_uri("/v1")
    return {
        "endpoint": endpoint,
        "instance": instance,
        "base_url": url,
        "keys": list(endpoint.keys.select_related("created_by")),
        "requests": endpoints.recent_requests(endpoint),
        "totals": endpoints.totals(endpoint),
        "simulated": get_backend(instance.backend_name).simulated,
        "cost": costs.cost_so_far(instance),
        **extra,
    }


@login_required
@require_GET
def detail(request, public_id):
    endpoint = _own(request, public_id)
    if wants_partial(request):
        return render(request, f"{DETAIL}#status", _context(request, endpoint))
    issued = request.session.pop(NEW_KEY_SESSION, None) or {}
    new_key = issued.get("key") if issued.get("endpoint") == str(endpoint.public_id) else None
    return render(request, DETAIL, _context(request, endpoint, new_key=new_key))


def _own(request, public_id, action="view"):
    try:
        return endpoints.get_endpoint(request.user, public_id, action)
    except NotFound as exc:
        raise Http404(exc.message) from exc
    except Forbidden as exc:  # a team's endpoint, and a role that may only see it
        raise PermissionDenied(str(exc.message)) from exc


@login_required
@require_GET
def chart(request, public_id):
    """Requests, errors, latency and tokens per minute for the endpoint's chart."""
    return JsonResponse(endpoints.request_chart(_own(request, public_id)))


@login_required
@require_POST
def create_key(request, public_id):
    endpoint = _own(request, public_id, "change")
    try:
        issued = endpoints.create_key(endpoint, name=request.POST.get("name", ""), by=request.user)
    except ServiceError as exc:
        messages.error(request, str(exc.message))
        return redirect(endpoint)
    # The key is shown once, on the next page view (in the examples too); only its hash is kept. Redirecting
    # first means a reload never creates a second key.
    request.session[NEW_KEY_SESSION] = {"endpoint": str(endpoint.public_id), "key": issued.plaintext}
    return redirect(endpoint)


@login_required
@require_POST
def revoke_key(request, public_id, key_id):
    endpoint = _own(request, public_id, "change")
    try:
        key = endpoints.revoke_key(endpoint, key_id)
    except NotFound as exc:
        raise Http404(exc.message) from exc
    messages.success(request, _("Key %(prefix)s… is revoked.") % {"prefix": key.prefix})
    return redirect(endpoint)


def _act(request, public_id, operation, event=None):
    endpoint = _own(request, public_id, "change")
    try:
        operation(endpoint)
    except ServiceError as exc:
        messages.error(request, str(exc.message))
    else:
        if event:
            record(endpoint.instance, request.user, event, subject=endpoint.instance.name)
    return redirect(endpoint)


@login_required
@require_POST
def stop(request, public_id):
    return _act(request, public_id, lambda e: lifecycle.stop(e.instance), TeamEvent.Action.STOPPED)


@login_required
@require_POST
def start(request, public_id):
    return _act(request, public_id, lambda e: lifecycle.start(e.instance, by=request.user), TeamEvent.Action.STARTED)


@login_required
@require_POST
def release(request, public_id):
    endpoint = _own(request, public_id, "change")
    try:
        lifecycle.release(endpoint.instance)
    except ServiceError as exc:
        messages.error(request, str(exc.message))
        return redirect(endpoint)
    record(endpoint.instance, request.user, TeamEvent.Action.RELEASED, subject=endpoint.instance.name)
    return redirect(reverse("endpoints:list"))


@login_required
@require_POST
def scale_to_zero(request, public_id):
    def apply(endpoint):
        endpoints.set_idle_stop(endpoint, _idle_minutes(request.POST.get("idle_stop_minutes")))

    return _act(request, public_id, apply)
