"""The account's secrets page: names and when they changed; add one, replace a value, delete. A value is never
shown, not even back in the form after an error."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.debug import sensitive_post_parameters
from django.views.decorators.http import require_http_methods, require_POST

from core.errors import NotFound, ServiceError
from core.field_errors import FieldError
from core.htmx import wants_partial

from .. import secrets
from ..forms import SecretForm, SecretValueForm
from ..models import Secret


def _page(request, form=None, *, saved="", error="", status=200):
    context = {
        "form": form or SecretForm(),
        "secrets": Secret.objects.for_user(request.user),
        "saved": saved,
        "error": error,
        "max_secrets": secrets.MAX_SECRETS_PER_USER,
    }
    if wants_partial(request):
        # htmx swaps 200s only: the partial carries the errors; a plain form post gets a real 400.
        return render(request, "instances/secrets.html#secret-panel", context)
    return render(request, "instances/secrets.html", context, status=status)


def _refused(form, exc: ServiceError) -> None:
    field = exc.field if isinstance(exc, FieldError) and exc.field in form.fields else None
    form.add_error(field, str(exc.message))


@sensitive_post_parameters("value")
@login_required
@require_http_methods(["GET", "POST"])
def secret_list(request):
    if request.method == "GET":
        return _page(request)
    form = SecretForm(request.POST)
    if not form.is_valid():
        return _page(request, form, status=400)
    try:
        secret = secrets.create_secret(request.user, form.cleaned_data["name"], form.cleaned_data["value"])
    except ServiceError as exc:
        _refused(form, exc)
        return _page(request, form, status=400)
    return _page(request, saved=secret.name)


@sensitive_post_parameters("value")
@login_required
@require_POST
def secret_replace(request, name):
    """A new value for an existing secret (a missing one, or someone else's, is a 404)."""
    form = SecretValueForm(request.POST)
    if not form.is_valid():
        return _page(request, error=" ".join(form.errors.get("value", [])), status=400)
    try:
        secrets.get_secret(request.user, name)
        secret, _created = secrets.put_secret(request.user, name, form.cleaned_data["value"])
    except NotFound as exc:
        raise Http404(str(exc.message)) from exc
    except ServiceError as exc:
        return _page(request, error=str(exc.message), status=400)
    return _page(request, saved=secret.name)


@login_required
@require_POST
def secret_delete(request, name):
    try:
        secrets.delete_secret(request.user, name)
    except NotFound as exc:
        raise Http404(str(exc.message)) from exc
    messages.success(request, _("Secret %(name)s deleted.") % {"name": name})
    if wants_partial(request):
        return _page(request)
    return redirect("instances:secrets")
