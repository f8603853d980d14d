"""The launches waiting for a card (a panel of the instances list), and the page of one: its place in the queue
and the time it should start by, polled while it waits; once it started, the instance's page. And its cancel
button."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_POST

from core.errors import Forbidden, NotFound, ServiceError
from core.htmx import wants_partial
from teams.context import acting

from .. import queue, waiting
from ..models import WaitingLaunch


def _own(request, public_id) -> WaitingLaunch:
    action = "view" if request.method in ("GET", "HEAD") else "change"
    try:
        return waiting.get_waiting(request.user, public_id, action)
    except NotFound as exc:
        raise Http404(str(exc.message)) from exc
    except Forbidden as exc:
        raise PermissionDenied(str(exc.message)) from exc


@login_required
@require_GET
def waiting_list(request):
    """The context's launches still waiting for a card, with their places: a panel the instances list loads."""
    entries = list(
        WaitingLaunch.objects.filter(owner=acting(request).account, state=WaitingLaunch.State.WAITING)
        .select_related("chip")
        .order_by("queued_at")[:50]
    )
    places = queue.places({(queue.LAUNCH, entry.pk) for entry in entries}, now=timezone.now())
    for entry in entries:
        entry.queue_place = places.get((queue.LAUNCH, entry.pk))
    return render(request, "instances/partials/waiting_list.html", {"entries": entries})


@login_required
@require_GET
def detail(request, public_id):
    entry = _own(request, public_id)
    if entry.state == WaitingLaunch.State.STARTED and entry.instance is not None:
        if wants_partial(request):
            response = HttpResponse(status=204)
            response["HX-Redirect"] = entry.instance.get_absolute_url()
            return response
        return redirect(entry.instance)
    place = queue.places({(queue.LAUNCH, entry.pk)}, now=timezone.now()).get((queue.LAUNCH, entry.pk))
    context = {"entry": entry, "queue_place": place}
    return render(
        request, "instances/waiting.html#live" if wants_partial(request) else "instances/waiting.html", context
    )


@login_required
@require_POST
def cancel(request, public_id):
    entry = _own(request, public_id)
    try:
        waiting.cancel(entry)
    except ServiceError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, _("“%(name)s” left the queue.") % {"name": entry.name})
    return redirect(entry)
