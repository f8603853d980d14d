"""The SSH keys page: list, add and delete the public keys the SSH gateway lets in."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_http_methods, require_POST

from core.errors import NotFound, ServiceError
from core.field_errors import FieldError
from core.htmx import wants_partial

from .. import ssh_keys
from ..forms import SSHKeyForm
from ..models import SSHKey


def _page(request, form, added=None, status=200):
    context = {"form": form, "keys": SSHKey.objects.for_user(request.user), "added": added}
    if wants_partial(request):
        # htmx swaps 200s only: the partial carries the form's errors.
        return render(request, "accounts/ssh_keys.html#ssh-key-panel", context)
    return render(request, "accounts/ssh_keys.html", context, status=status)


@login_required
@require_http_methods(["GET", "POST"])
def ssh_key_list(request):
    if request.method == "GET":
        return _page(request, SSHKeyForm())
    form = SSHKeyForm(request.POST)
    if not form.is_valid():
        return _page(request, form, status=400)
    try:
        added = ssh_keys.add_ssh_key(request.user, **form.cleaned_data)
    except FieldError as exc:
        form.add_error(exc.field, exc.message)
        return _page(request, form, status=400)
    except ServiceError as exc:
        form.add_error(None, exc.message)
        return _page(request, form, status=400)
    return _page(request, SSHKeyForm(), added=added)


@login_required
@require_POST
def delete_ssh_key(request, public_id):
    try:
        key = ssh_keys.remove_ssh_key(request.user, public_id)
    except NotFound as exc:
        raise Http404(exc.message) from exc  # someone else's key: the same 404 as a missing one
    messages.success(request, _("SSH key “%(name)s” deleted.") % {"name": key.name})
    if wants_partial(request):
        return _page(request, SSHKeyForm())
    return redirect("console:ssh-keys")
