"""The web file browser at /storage/. Each action calls one service and answers with the folder's listing: the
partial for htmx, a redirect (success) or the page with the message (refusal) otherwise."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_POST

from core.errors import NotFound, ServiceError
from core.htmx import wants_partial
from teams import roles
from teams.context import page_account

from .. import quota, services
from ..api.views import download_response

# Small enough that an interrupted upload loses little and the progress bar moves; large enough that the
# per-request cost stays small next to the transfer.
BROWSER_CHUNK_BYTES = 2 * 1024 * 1024


def _usage_context(user) -> dict:
    usage = quota.usage(user)
    within_free = min(usage.used, usage.free)
    return {
        "usage": usage,
        "usage_free_pct": 100.0 * within_free / usage.maximum if usage.maximum else 0,
        "usage_billed_pct": 100.0 * (usage.used - within_free) / usage.maximum if usage.maximum else 0,
    }


def _listing(request, folder, *, status=200, error=None):
    user = page_account(request)
    context = {
        "folder": folder,
        "entries": services.children(user, folder),
        "crumbs": services.breadcrumbs(user, folder),
        "error": error,
        "folder_url": _folder_url(folder),
        "chunk_size": BROWSER_CHUNK_BYTES,
        "is_partial": wants_partial(request),
        **_usage_context(user),
    }
    template = "storage/index.html#listing" if wants_partial(request) else "storage/index.html"
    return render(request, template, context, status=status)


def _folder_url(folder) -> str:
    return reverse("storage:folder", args=[folder.public_id]) if folder else reverse("storage:index")


@login_required
@require_GET
def index(request):
    return _listing(request, None)


@login_required
@require_GET
def folder(request, public_id):
    try:
        current = services.get_folder(page_account(request), public_id)
    except NotFound as exc:
        raise Http404(exc.message) from exc
    return _listing(request, current)


def _act(request, current, operation, success: str):
    """Run ``operation()``; answer with ``current``'s listing. Someone else's object is the same 404 as none."""
    try:
        result = operation()
    except NotFound as exc:
        raise Http404(exc.message) from exc
    except ServiceError as exc:
        return _listing(request, current, status=exc.status if exc.status < 500 else 400, error=exc.message)
    messages.success(request, success % {"name": result.name})
    if wants_partial(request):
        return _listing(request, current)
    return redirect(_folder_url(current))


def _parent_of(request, public_id):
    try:
        return services.get_entry(page_account(request), public_id).parent
    except NotFound as exc:
        raise Http404(exc.message) from exc


@login_required
@require_POST
def create_folder(request):
    owner = page_account(request, roles.OPERATE)
    parent_id = request.POST.get("parent") or None
    try:
        parent = services.get_folder(owner, parent_id, "change") if parent_id else None
    except NotFound as exc:
        raise Http404(exc.message) from exc
    name = request.POST.get("name", "")
    return _act(
        request,
        parent,
        lambda: services.create_folder(owner, parent, name),
        _("Folder “%(name)s” created."),
    )


@login_required
@require_POST
def rename(request, public_id):
    owner = page_account(request, roles.OPERATE)
    current = _parent_of(request, public_id)
    name = request.POST.get("name", "")
    return _act(
        request,
        current,
        lambda: services.rename(owner, public_id, name),
        _("Renamed to “%(name)s”."),
    )


@login_required
@require_POST
def move(request, public_id):
    owner = page_account(request, roles.OPERATE)
    current = _parent_of(request, public_id)
    target = request.POST.get("folder", "")
    return _act(
        request,
        current,
        lambda: services.move(owner, public_id, target),
        _("“%(name)s” moved."),
    )


@login_required
@require_POST
def delete(request, public_id):
    owner = page_account(request, roles.OPERATE)
    current = _parent_of(request, public_id)
    return _act(request, current, lambda: services.delete(owner, public_id), _("“%(name)s” deleted."))


@login_required
@require_GET
def download(request, public_id):
    try:
        return download_response(request, *services.open_file(page_account(request), public_id))
    except NotFound as exc:
        raise Http404(exc.message) from exc
    except ServiceError as exc:
        messages.error(request, exc.message)
        return redirect(_folder_url(_parent_of(request, public_id)))
