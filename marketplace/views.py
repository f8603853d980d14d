"""Hub pages: the searchable list (htmx, filters in the URL) and an item's page with its card, files and prices."""

from functools import cached_property

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import Http404
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import urlencode
from django.utils.translation import get_language
from django.views.decorators.http import require_GET, require_POST

from billing.quote import load_price_book
from console.errors import NotFound, ServiceError
from console.htmx import wants_partial
from instances.attachments import MOUNTABLE
from instances.models import Instance
from storage.models import HubMount
from teams.context import priced_for

from .choices import HubVisibility
from .forms import HubSearchForm
from .hub import services

LIST_TEMPLATE = "marketplace/hub/list.html"
DETAIL_TEMPLATE = "marketplace/hub/detail.html"
PAGE_SIZE = 20
MOUNT_CHOICES = 10  # instances offered on an item's page; the rest mount from their own page


class CappedPaginator(Paginator):
    """A paginator told its count (``services.count_matches``) instead of counting every match itself."""

    def __init__(self, object_list, per_page, count: int):
        super().__init__(object_list, per_page)
        self._count = count

    @cached_property
    def count(self):
        return self._count


def _menus(form) -> dict:
    """The filter menus, each including the value in the URL even when the menu would not offer it."""
    options = services.facet_options()
    menus = {
        "tasks": services.task_choices(get_language() or ""),
        "licences": options["licence"],
        # Not "languages": base.html's language switch sets that name for the whole page.
        "hub_languages": services.language_choices(options["language"]),
        "frameworks": options["framework"],
    }
    current = form.cleaned_data if form.is_valid() else {}
    if (task := current.get("task")) and task not in dict(menus["tasks"]):
        menus["tasks"] = [*menus["tasks"], (task, task)]
    if (language := current.get("language")) and language not in dict(menus["hub_languages"]):
        menus["hub_languages"] = [*menus["hub_languages"], (language, services.language_label(language))]
    for menu, name in (("licences", "licence"), ("frameworks", "framework")):
        if (value := current.get(name)) and value not in menus[menu]:
            menus[menu] = [*menus[menu], value]
    return menus


@require_GET
def hub_list(request):
    form = HubSearchForm(request.GET)
    context = {"form": form, "page": None, "error": ""}
    status = 200
    if form.is_valid():
        try:
            items = services.search_items(request.user, form.hub_query(), form.sort_order())
            total, exact = services.count_matches(items)
            page = CappedPaginator(items, PAGE_SIZE, total).get_page(request.GET.get("page"))
            context |= {"page": page, "total": total, "exact": exact}
        except ServiceError as exc:
            context["error"], status = str(exc.message), exc.status
    else:
        context["error"] = " ".join(f"{form[name].label}: {' '.join(errors)}" for name, errors in form.errors.items())
        status = 400
    if wants_partial(request):
        return render(request, f"{LIST_TEMPLATE}#results", context, status=status)
    return render(request, LIST_TEMPLATE, context | _menus(form), status=status)


def _item_or_404(request, org: str, name: str):
    try:
        return services.get_item(request.user, f"{org}/{name}")
    except NotFound as exc:
        raise Http404(exc.message) from exc


def _mount_choices(user, item) -> list[dict]:
    """The user's instances that can take a mount now (running, starting or stopped…), newest first, each with
    whether ``item`` is already mounted there."""
    if not user.is_authenticated:
        return []
    instances = Instance.objects.for_user(user, "change").not_endpoints().filter(status__in=MOUNTABLE)
    if item.owner_id is not None and item.visibility != HubVisibility.PUBLIC:
        instances = instances.filter(owner_id=item.owner_id)  # a private item goes only into its owner's machines
    instances = list(instances.with_related()[:MOUNT_CHOICES])
    mounted = set(HubMount.objects.filter(instance__in=instances, repo=item.repo).values_list("instance_id", flat=True))
    return [{"instance": i, "mounted": i.pk in mounted} for i in instances]


def _launch_with_mount_url(item, chip_prices) -> str:
    """The launch wizard with ``item`` preselected as a mount, on the cheapest chip it runs on."""
    params = {"cards": "1", "plan": "payg", "term_end_action": "continue", "mounts": item.repo}
    priced = [row for row in chip_prices if row.per_card_hour is not None]
    if priced:
        params["chip"] = min(priced, key=lambda row: row.per_card_hour).chip.slug
    return f"{reverse('instances:launch')}?{urlencode(params)}"


@require_GET
def hub_detail(request, org: str, name: str):
    item = _item_or_404(request, org, name)
    files = list(services.files_of(item))
    chip_prices = services.chip_prices(item, load_price_book(**priced_for(request)))
    context = {
        "item": item,
        "files": files,
        "files_total": sum(f.size_bytes for f in files),
        "chip_prices": chip_prices,
        "liked": services.liked_by(request.user, item),
        "mount_choices": _mount_choices(request.user, item),
        "launch_with_mount_url": _launch_with_mount_url(item, chip_prices),
    }
    return render(request, DETAIL_TEMPLATE, context)


@login_required
@require_POST
def hub_like(request, org: str, name: str):
    """Like or unlike (a toggle); htmx swaps the button, a plain form post comes back to the item's page."""
    item = _item_or_404(request, org, name)
    liked = services.toggle_like(request.user, item)
    if wants_partial(request):
        item = services.refresh_counts(item)
        return render(request, f"{DETAIL_TEMPLATE}#like-button", {"item": item, "liked": liked})
    return redirect("marketplace:hub-item", org=item.org, name=item.name)


HUB_MOUNT_RESULTS = 10


@login_required
@require_GET
def hub_mount_search(request):
    """Hub items matching ``q`` (Chinese or English) for the mount pickers: the instance panel's and the wizard's.
    With ``instance``, each result mounts into that instance (the caller's own; anything else is a 404)."""
    from instances.services import get_instance

    from .hub.search import HubQuery

    q = request.GET.get("q", "").strip()[:200]
    items = list(services.search_items(request.user, HubQuery(q=q))[:HUB_MOUNT_RESULTS]) if q else []
    mount_url = None
    if request.GET.get("instance"):
        try:
            instance = get_instance(request.user, request.GET["instance"])
        except NotFound as exc:
            raise Http404(exc.message) from exc
        mount_url = reverse("storage:instance-mount", args=[instance.public_id])
    context = {"items": items, "hub_q": q, "mount_url": mount_url}
    return render(request, "marketplace/hub/mount_results.html", context)
