"""The cloud disks page (/storage/disks/) and the disks-and-mounts panel of the instance page.

Each action calls one service (``storage.disks`` or ``storage.mounts``) and answers with the refreshed
list or panel: the partial for htmx, a redirect (success) or the page with the message (refusal) otherwise.
Someone else's disk or instance is the same 404 as a missing one.
"""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_POST

from billing.quote import storage_price
from catalog.models import Zone
from catalog.services import get_zone
from core.attaching import machines
from core.errors import Forbidden, NotFound, ServiceError
from core.htmx import wants_partial
from teams import roles
from teams.accounts import is_account
from teams.context import page_account

from .. import disks, mounts
from ..attached import shared_listing
from ..choices import DiskStatus

DISKS_TEMPLATE = "storage/disks.html"
PANEL_TEMPLATE = "storage/instance_panel.html"


# The disks page ---------------------------------------------------------------------------------------------------


def _disks_context(account, error: str = "", form=None) -> dict:
    rows = list(disks.account_disks(account))
    prices = disks.prices_for(rows)
    instances_by_zone: dict[int, list] = {}
    zones = {disk.zone_id for disk in rows if disk.status == DiskStatus.AVAILABLE}
    if zones:  # the attach menus: only for disks that can be attached, with only what a menu shows
        attachable = machines().attachable(account.pk, zones).only("public_id", "name", "status", "zone_id")
        for instance in attachable:
            instances_by_zone.setdefault(instance.zone_id, []).append(instance)
    for disk in rows:
        disk.quote = prices[disk.size_gb]
        disk.attach_choices = instances_by_zone.get(disk.zone_id, [])
    try:
        price = storage_price("disk")
    except ServiceError:
        price = None
    return {
        "disks": rows,
        "zones": Zone.objects.active().select_related("region"),  # read only where the page shows the create form
        "price": price,
        "error": error,
        "form": form or {},
        "min_gb": disks.MIN_GB,
        "max_gb": disks.MAX_GB,
    }


def _disks_page(request, *, status=200, error="", form=None):
    template = f"{DISKS_TEMPLATE}#disk-list" if wants_partial(request) else DISKS_TEMPLATE
    context = _disks_context(page_account(request), error, form) | {"is_partial": wants_partial(request)}
    return render(request, template, context, status=status)


@login_required
@require_GET
def disk_list(request):
    return _disks_page(request)


def _disk_act(request, operation, success: str, form=None):
    try:
        disk = operation()
    except NotFound as exc:
        raise Http404(exc.message) from exc
    except ServiceError as exc:
        code = exc.status if exc.status < 500 else 400
        # htmx swaps 200s only: the partial carries the message; a plain form post gets the real status.
        return _disks_page(request, status=200 if wants_partial(request) else code, error=exc.message, form=form)
    messages.success(request, success % {"name": disk.name})
    if wants_partial(request):
        return _disks_page(request)
    return redirect("storage:disks")


@login_required
@require_POST
def disk_create(request):
    form = {k: request.POST.get(k, "") for k in ("name", "size_gb", "zone")}

    account = page_account(request, roles.OPERATE)

    def create():
        zone = get_zone(form["zone"])
        return disks.create(account, name=form["name"], size_gb=form["size_gb"], zone=zone, by=request.user)

    return _disk_act(request, create, _("Disk “%(name)s” created."), form)


@login_required
@require_POST
def disk_grow(request, public_id):
    size = request.POST.get("size_gb", "")
    return _disk_act(request, lambda: disks.grow(request.user, public_id, size), _("Disk “%(name)s” grown."))


@login_required
@require_POST
def disk_attach(request, public_id):
    instance_id = request.POST.get("instance", "")

    def attach():
        disks.get_disk(request.user, public_id, "change")  # someone else's disk: 404 (a watcher's: 403) first
        if not instance_id:
            raise ServiceError(_("Choose an instance to attach the disk to."), code="invalid_instance")
        return disks.attach(request.user, public_id, instance_id)

    return _disk_act(request, attach, _("Disk “%(name)s” attached."))


@login_required
@require_POST
def disk_detach(request, public_id):
    return _disk_act(request, lambda: disks.detach(request.user, public_id), _("Disk “%(name)s” detached."))


@login_required
@require_POST
def disk_delete(request, public_id):
    return _disk_act(request, lambda: disks.delete(request.user, public_id), _("Disk “%(name)s” deleted."))


# The instance page's disks-and-mounts panel ---------------------------------------------------------------------


def panel_context(instance, *, error: str = "", hub_q: str = "") -> dict:
    """What the panel shows: the owner's cloud storage (``/root/shared``, or a team's ``/root/shared-team``) with
    the top of its tree, hub mounts, attached disks, and the owner's detached disks of the instance's zone to
    attach. A fixed number of queries."""
    attached, spare = disks.panel_disks(instance)
    return {
        "instance": instance,
        "mounts": list(mounts.mounts_of(instance)),
        "attached_disks": attached,
        "spare_disks": spare,
        "shared_target": machines().shared_target(instance),
        "team_shared": is_account(instance.owner),  # the team's cloud storage, not a member's
        "shared_entries": shared_listing(instance.owner),
        "panel_simulated": machines().is_simulated(instance),
        "can_change": machines().may_attach(instance),
        "panel_error": error,
        "hub_q": hub_q,
    }


def _own_instance(request, public_id):
    """The instance of the panel: reading it needs the view permission, changing its disks and mounts (a POST) the
    operate one (a team role that may only see gets a 403)."""
    action = "view" if request.method in ("GET", "HEAD") else "change"
    try:
        return machines().get(request.user, public_id, action)
    except NotFound as exc:
        raise Http404(exc.message) from exc
    except Forbidden as exc:
        raise PermissionDenied(str(exc.message)) from exc


def _panel_act(request, public_id, operation):
    instance = _own_instance(request, public_id)
    error = ""
    try:
        operation(instance)
    except NotFound as exc:
        raise Http404(exc.message) from exc
    except ServiceError as exc:
        error = exc.message
    if wants_partial(request):
        instance = _own_instance(request, public_id)
        return render(
            request,
            f"{PANEL_TEMPLATE}#panel",
            panel_context(instance, error=error),
        )
    if error:
        messages.error(request, error)
    return redirect(reverse("instances:detail", args=[instance.public_id]) + "#attachments")


@login_required
@require_GET
def instance_panel(request, public_id):
    """The panel alone: the instance page loads it after itself (htmx), so the page does not wait for the owner's
    disks, mounts and cloud storage."""
    instance = _own_instance(request, public_id)
    if instance.owner_id == request.user.pk:
        instance.owner = request.user  # known already: no query for it
    return render(request, f"{PANEL_TEMPLATE}#panel", panel_context(instance))


@login_required
@require_POST
def instance_mount(request, public_id):
    repo = request.POST.get("repo", "").strip()
    return _panel_act(request, public_id, lambda instance: mounts.mount(instance.owner, instance, repo))


@login_required
@require_POST
def instance_unmount(request, public_id):
    repo = request.POST.get("repo", "").strip()
    return _panel_act(request, public_id, lambda instance: mounts.unmount(instance.owner, instance, repo))


@login_required
@require_POST
def instance_attach(request, public_id):
    disk_id = request.POST.get("disk", "")

    def attach(instance):
        if not disk_id:
            raise ServiceError(_("Choose a disk to attach."), code="invalid_disk")
        disks.attach(request.user, disk_id, instance.public_id)

    return _panel_act(request, public_id, attach)


@login_required
@require_POST
def instance_detach(request, public_id):
    disk_id = request.POST.get("disk", "")

    def detach(instance):
        disk = disks.get_disk(request.user, disk_id)
        if disk.instance_id != instance.pk:
            raise NotFound(_("No such disk."))
        disks.detach(request.user, disk_id)

    return _panel_act(request, public_id, detach)
