"""Instance pages: the list with live status, the launch wizard, the detail page and its actions."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.db.models import Prefetch
from django.http import Http404, HttpResponse, JsonResponse, QueryDict
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from billing.models import Plan
from billing.quote import quote_disk
from catalog.models import Chip, Zone
from core.chart_time import minute_label
from core.errors import Forbidden, NotFound, ServiceError
from core.htmx import wants_partial
from teams import roles
from teams.context import acting
from teams.models import Membership, TeamEvent
from teams.services import record

from .. import attachments, choosing, costs, launching, lifecycle, shutdown, waiting
from ..backends import get_backend
from ..capacity import CapacityError
from ..choices import LIVE
from ..forms import ADVANCED_FIELDS, AutoShutdownForm, LaunchForm
from ..images import image_name, launch_warning
from ..logs import read_logs
from ..models import Instance, InstanceEvent, WaitingLaunch
from ..shutdown import FINISHED

PAGE_SIZE = 50
# What a row of the list shows: the rest of each instance and its catalogue rows is not read.
LIST_FIELDS = (
    "public_id",
    "name",
    "status",
    "kind",
    "cards",
    "spot",
    "price_per_hour",
    "created_at",
    "owner",
    "chip__slug",
    "chip__name",
    "chip__name_zh",
    "zone__name",
    "zone__name_zh",
    "plan__name",
    "plan__name_zh",
)
SHUTDOWN_FIELDS = ("auto_shutdown_at", "idle_shutdown_minutes")


def _instances_of(account):  # an account, or its id
    return Instance.objects.filter(owner=account).with_related().not_endpoints()


@login_required
@require_GET
def instance_list(request):
    """The current instances (live status), or with ``?show=released`` the released ones: when they ran and
    what they cost."""
    # The context's account is the person's own or a team's they belong to (checked once per request by acting):
    # its instances are theirs to see, so the list filters on the owner alone.
    account = acting(request).account
    if request.GET.get("show") == "released":
        return _released_list(request, _instances_of(account))
    live = (
        Instance.objects.filter(owner=account)
        .not_endpoints()
        .visible()
        .select_related("chip", "zone", "plan")
        .only(*LIST_FIELDS)
    )
    page = Paginator(live, PAGE_SIZE).get_page(request.GET.get("page"))
    rows = list(page)  # read once: the rows shown and whether any is live come from the same read
    context = {"page_obj": page, "rows": rows, "any_live": any(i.status in LIVE for i in rows)}
    template = "instances/list.html#rows" if wants_partial(request) else "instances/list.html"
    return render(request, template, context)


def _released_list(request, mine):
    released = mine.released().prefetch_related(Prefetch("events", InstanceEvent.objects.order_by("at", "id")))
    page = Paginator(released, PAGE_SIZE).get_page(request.GET.get("page"))
    rows = [_released_row(instance) for instance in page]
    context = {"page_obj": page, "released_rows": rows, "show_released": True}
    return render(request, "instances/list.html", context)


def _released_row(instance) -> dict:
    events = list(instance.events.all())
    ran = [e.at for e in events if e.new == "running" and e.old != "running"]
    released_at = next((e.at for e in reversed(events) if e.new == "released"), None)
    return {
        "instance": instance,
        "first_run": ran[0] if ran else None,
        "released_at": released_at,
        "cost": costs.cost_so_far(instance, events),
    }


def _wizard_form(request, data=None):
    return LaunchForm(
        data,
        zones=Zone.objects.active().select_related("region"),
        chips=list(Chip.objects.offered().order_by("sort_order")),
        plans=Plan.objects.active(),
        user=acting(request).account,
    )


def _preview(request, form):
    """The live price: a quote for what is chosen so far, or the reason there is none."""
    if not form.is_valid():
        return None, ""
    try:
        account = acting(request).account
        return launching.preview(account, choosing.resolve(account, form.launch_request()), by=request.user), ""
    except ServiceError as exc:
        return None, str(exc.message)


def _disk_price(form, quote) -> dict:
    """The new data disk's price beside the compute price: it is billed per GB-day, running or not."""
    size = form.cleaned_data.get("data_disk_gb") if form.is_valid() else None
    if not quote or not size:
        return {}
    disk = quote_disk(size)
    return {"disk_quote": disk, "running_total": quote.payable_per_hour + disk.payable_per_hour}


@login_required
@require_http_methods(["GET", "POST"])
def launch(request):
    """GET: the wizard (htmx re-renders it as choices change, with the live price); POST: launch."""
    if request.method == "POST":
        return _launch(request)
    data = request.GET.copy() if request.GET else _first_choice()
    form = _wizard_form(request, data)
    images = [value for value, _label in form.fields["image"].choices]
    if data.get("image") not in images and images:
        data["image"] = images[0]  # the family changed: offer its first image
    preview_form = _price_form(request, data)
    quote, problem = _preview(request, preview_form)
    context = {"form": _wizard_form(request, data), "quote": quote, "problem": problem, "show_errors": False}
    context |= _shutdown_wizard_context()
    context |= _disk_price(preview_form, quote)
    template = "instances/launch.html#wizard" if wants_partial(request) else "instances/launch.html"
    return render(request, template, context)


def _price_form(request, data) -> LaunchForm:
    """The wizard's choices as far as the price goes: it depends on neither the name, the auto-shutdown nor what
    the machine boots with."""
    preview = data.copy()
    preview["name"] = preview.get("name") or "preview"
    for name in SHUTDOWN_FIELDS + ADVANCED_FIELDS:
        preview.pop(name, None)
    return _wizard_form(request, preview)


def _shutdown_wizard_context() -> dict:
    threshold = Instance._meta.get_field("idle_threshold_percent").default
    return {"shutdown_fields": SHUTDOWN_FIELDS, "idle_threshold": threshold, "advanced_fields": ADVANCED_FIELDS}


def _first_choice() -> QueryDict:
    chip = Chip.objects.offered().order_by("sort_order").first()
    data = QueryDict(mutable=True)
    data.update({"chip": chip.slug if chip else "", "cards": "1", "plan": "payg", "term_end_action": "continue"})
    return data


def _launch(request):
    form = _wizard_form(request, request.POST)
    price_form = _price_form(request, request.POST)
    quote, problem = _preview(request, price_form)
    if form.is_valid():
        context = acting(request)
        try:
            context.require(roles.OPERATE)
            launched = waiting.launch_or_wait(
                context.account, form.launch_request(), by=request.user, wait=form.cleaned_data["wait_for_card"]
            )
        except ServiceError as exc:
            form.add_error(None, exc.message)
        else:
            if isinstance(launched, WaitingLaunch):
                messages.info(request, _("No card is free: “%(name)s” waits in the queue.") % {"name": launched.name})
                return _redirect(request, launched.get_absolute_url())
            instance = launched
            record(instance, request.user, TeamEvent.Action.LAUNCHED, subject=instance.name)
            messages.success(request, _("Instance “%(name)s” is being created.") % {"name": instance.name})
            if warning := launch_warning(instance):
                messages.warning(request, warning)
            return _redirect(request, instance.get_absolute_url())
    context = {"form": form, "quote": quote, "problem": problem, "show_errors": True} | _disk_price(price_form, quote)
    context |= _shutdown_wizard_context()
    template = "instances/launch.html#wizard" if wants_partial(request) else "instances/launch.html"
    # htmx swaps 200s only: the partial carries the errors; a plain form post gets a real 400.
    return render(request, template, context, status=200 if wants_partial(request) else 400)


def _redirect(request, url: str) -> HttpResponse:
    if request.htmx:
        response = HttpResponse(status=204)
        response["HX-Redirect"] = url
        return response
    return redirect(url)


def _own(request, public_id) -> Instance:
    """The caller's instance (or their team's): reading it needs the view permission, a POST the operate one. A
    missing one and someone else's are the same 404 page; a team role that may see but not act gets a 403."""
    action = "view" if request.method in ("GET", "HEAD") else "change"
    try:
        return lifecycle.get_instance(request.user, public_id, action)
    except NotFound as exc:
        raise Http404(str(exc.message)) from exc
    except Forbidden as exc:
        raise PermissionDenied(str(exc.message)) from exc


def _detail_context(instance, error=""):
    events = list(InstanceEvent.objects.filter(instance=instance).order_by("-at", "-id"))
    backend = get_backend(instance.backend_name)
    return {
        "instance": instance,
        "events": events,
        "cost": costs.cost_so_far(instance, events),
        "image_name": image_name(instance.image),
        "simulated": backend.simulated,
        "card_metrics": instance.cards > 0 and backend.has_cards,
        "choice_reason": choosing.reason(instance.choice) if instance.choice else "",
        "error": error,
    }


@login_required
@require_GET
def detail(request, public_id):
    instance = _own(request, public_id)
    if instance.kind == Instance.Kind.ENDPOINT:
        # An endpoint has no SSH, JupyterLab or training curves: its own page has its keys and the curl example.
        return redirect(_endpoint_url(instance))
    if wants_partial(request):
        # The poll says which status the page shows; a change (released: disks detached, nothing to change)
        # brings the panels below the status along, out of band.
        changed = request.GET.get("seen") != instance.status
        return _status_partial(request, instance, refresh_panels=changed)
    # The disks-and-mounts panel loads after the page (storage's own view): the status, the actions and the access
    # come first.
    context = _detail_context(instance) | _shutdown_context(instance) | _logs_context(instance)
    return render(request, "instances/detail.html", context | _operator_context(request, instance))


def _operator_context(request, instance) -> dict:
    """A team's instance names its team and who launched it, and offers its actions to the roles that may operate
    it (no query for one's own, nor in the team's context; one outside it)."""
    if instance.owner_id == request.user.pk:
        return {"team": None, "can_operate": True}
    member = acting(request).membership  # read for this request already: in the team's context, it is this one
    if member is None or member.team.account_id != instance.owner_id:
        member = (
            Membership.objects.select_related("team")
            .filter(user=request.user, team__account_id=instance.owner_id)
            .first()
        )
    return {
        "team": member.team if member else None,
        "can_operate": member is not None and roles.can(member.role, roles.OPERATE),
    }


def _owner(request, instance):
    """The instance's owner, with no query when it is the caller."""
    return request.user if instance.owner_id == request.user.pk else instance.owner


def _panels_context(user, instance) -> dict:
    """The disks-and-mounts panel, the auto-shutdown panel and the logs: they depend on the status too."""
    instance.owner = user  # known already: the panel reads it with no query
    return attachments.panel_context(instance) | _shutdown_context(instance) | _logs_context(instance)


def _status_partial(request, instance, error="", *, refresh_panels=True):
    # The status part holds the actions: who may take them as on the page (a stopped instance offers "Save as
    # image" to those who may operate it, without a reload).
    context = _detail_context(instance, error) | _operator_context(request, instance)
    if refresh_panels:
        context |= _panels_context(_owner(request, instance), instance) | {"refresh_panels": True}
    return render(request, "instances/detail.html#status", context)


def _shutdown_context(instance, form=None) -> dict:
    if form is None:
        at, idle_minutes = instance.auto_shutdown_at, instance.idle_shutdown_minutes
        form = AutoShutdownForm(initial={"auto_shutdown_at": at, "idle_shutdown_minutes": idle_minutes})
    return {"instance": instance, "shutdown_form": form, "shutdown_editable": instance.status not in FINISHED}


@login_required
@require_POST
def auto_shutdown(request, public_id):
    """Change or clear when the instance shuts itself down; htmx swaps the panel, a plain post comes back."""
    instance = _own(request, public_id)
    form = AutoShutdownForm(request.POST)
    if form.is_valid():
        try:
            instance = shutdown.set_auto_shutdown(
                instance, form.cleaned_data["auto_shutdown_at"], form.cleaned_data["idle_shutdown_minutes"]
            )
        except ServiceError as exc:
            form.add_error(None, exc.message)
        else:
            form = None
            if not wants_partial(request):
                messages.success(request, _("Auto-shutdown saved."))
    if wants_partial(request):
        return render(request, "instances/detail.html#auto_shutdown", _shutdown_context(instance, form))
    if form is not None:
        messages.error(request, " ".join(str(e) for errors in form.errors.values() for e in errors))
    return redirect(instance)


def _endpoint_url(instance) -> str:
    # The endpoint app adds ``instance.endpoint`` (a one-to-one); instances need not know more of it.
    endpoint = getattr(instance, "endpoint", None)
    return endpoint.get_absolute_url() if endpoint else reverse("endpoints:list")


def _act(request, public_id, operation, event):
    """Run one service operation on the caller's instance; the page shows what happened or why not. A team's
    instance gets a line in the team's audit log."""
    instance = _own(request, public_id)
    error = ""
    try:
        operation(instance)
    except CapacityError as exc:
        error = str(exc.message)
    except ServiceError as exc:
        error = str(exc.message)
    else:
        record(instance, request.user, event, subject=instance.name)
    if wants_partial(request):
        return _status_partial(request, _own(request, public_id), error)
    if error:
        messages.error(request, error)
    return redirect(instance)


@login_required
@require_POST
def start(request, public_id):
    no_card = request.POST.get("no_card") == "1"

    def start_it(instance):
        return lifecycle.start(instance, no_card=no_card, by=request.user)

    return _act(request, public_id, start_it, TeamEvent.Action.STARTED)


@login_required
@require_POST
def stop(request, public_id):
    return _act(request, public_id, lifecycle.stop, TeamEvent.Action.STOPPED)


@login_required
@require_POST
def release(request, public_id):
    return _act(request, public_id, lifecycle.release, TeamEvent.Action.RELEASED)


@login_required
@require_GET
def training(request, public_id):
    """The training curves the workload logged (simulated on the simulated backend), for the chart."""
    return JsonResponse(costs.training_curves(_own(request, public_id)))


# Ports people open most, named on the port panel (any other port is listed by its number alone).
KNOWN_PORTS = {
    6006: "TensorBoard",
    7860: "Gradio",
    8501: "Streamlit",
    8265: "Ray",
    5000: "Flask",
    8000: "HTTP",
    8080: "HTTP",
}


@login_required
@require_GET
def ports(request, public_id):
    """The port panel: what listens on a TCP port inside the running machine, each opened through the console."""
    instance = _own(request, public_id)
    listening = get_backend(instance.backend_name).listening_ports(instance) if instance.status == "running" else []
    rows = [{"port": port, "name": KNOWN_PORTS.get(port, "")} for port in listening or []]
    # The ports an imported image says it serves on are listed before anything listens there.
    declared = [port for port in instance.access.get("image_ports", []) if port not in (listening or [])]
    context = {"instance": instance, "ports": rows, "declared": declared}
    return render(request, "instances/partials/ports.html", context)


@login_required
@require_GET
def open_port(request, public_id):
    """Open any port of the machine through the console (the form on the port panel): its address, or back to the
    page with why not."""
    instance = _own(request, public_id)
    raw = request.GET.get("port", "").strip()
    if not (raw.isascii() and raw.isdigit() and 1 <= int(raw) <= 65535):
        messages.error(request, _("A port is a whole number from 1 to 65535."))
        return redirect(instance.get_absolute_url())
    if instance.status != "running" or not instance.access.get("jupyter"):
        messages.error(request, _("Ports open while the machine is running."))
        return redirect(instance.get_absolute_url())
    if instance.access.get("lab_without_ports"):
        messages.error(
            request,
            _(
                "This image's JupyterLab has no jupyter-server-proxy, through which the console opens ports: reach "
                "them with SSH port forwarding (ssh -L PORT:localhost:PORT …), or install jupyter-server-proxy in "
                "the image."
            ),
        )
        return redirect(instance.get_absolute_url())
    port = int(raw)
    listening = get_backend(instance.backend_name).listening_ports(instance)
    if listening is not None and port not in listening:
        # Said on the console's page rather than the proxy's bare error page: what is missing and how to fix it.
        messages.error(
            request,
            _(
                "Nothing listens on port %(port)s inside the machine yet. Start your app there on 0.0.0.0:%(port)s "
                "(for example: python -m http.server %(port)s), then open the port again."
            )
            % {"port": port},
        )
        return redirect(instance.get_absolute_url())
    return redirect(f"{instance.get_absolute_url()}lab/proxy/{port}/")


@login_required
@require_GET
def metrics(request, public_id):
    """Card utilisation and memory per minute (simulated on the simulated backend), for the chart."""
    instance = _own(request, public_id)
    backend = get_backend(instance.backend_name)
    points = backend.metrics(instance, minutes=30) if instance.status == "running" else []
    return JsonResponse(
        {
            "simulated": backend.simulated,
            "labels": [minute_label(p.at) for p in points],
            "card_utilisation": [p.card_utilisation for p in points],
            "memory_used": [p.memory_used for p in points],
        }
    )


def _logs_context(instance) -> dict:
    """The logs panel's tail, or why there is none to show."""
    context = {"logs_loaded": True, "log_lines": [], "logs_simulated": False, "logs_error": ""}
    try:
        tail = read_logs(instance)
    except ServiceError as exc:
        return context | {"logs_error": str(exc.message)}
    return context | {"log_lines": tail.lines, "logs_simulated": tail.simulated}


@login_required
@require_GET
def logs(request, public_id):
    """The logs panel's tail, which the page polls every 2 s while the instance is live; once it is not, the answer
    is htmx's "stop polling" (286) with the last tail."""
    instance = _own(request, public_id)
    context = {"instance": instance} | _logs_context(instance)
    status = 286 if wants_partial(request) and not instance.is_live else 200
    return render(request, "instances/partials/logs.html#output", context, status=status)
