"""Hub pages: the searchable list (htmx, filters in the URL) and an item's page with its card, files and prices."""

from functools import cached_property

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.db.models import Exists, OuterRef
from django.http import Http404
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.http import urlencode
from django.utils.translation import get_language
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from billing.quote import load_price_book
from core import visitor_cache
from core.errors import Forbidden, NotFound, ServiceError
from core.htmx import wants_partial
from instances.attachments import MOUNTABLE
from instances.lifecycle import get_instance
from instances.models import Instance
from storage.models import HubMount
from teams.context import priced_for

from .choices import HubVisibility
from .forms import HubRepoForm, HubSearchForm, HubUploadForm
from .hub import repos, services
from .hub.search import HubQuery

LIST_TEMPLATE = "marketplace/hub/list.html"
LIST_CONTENT = "marketplace/hub/_list_content.html"
# How long a visitor's page of the hub list is kept at most: its counts (downloads, likes) may lag that long; an item
# saved, deleted, taken down or restored is a new generation of the page at once.
LIST_SECONDS = 30
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


def _hub_results(request) -> tuple[dict, int, HubSearchForm]:
    """The list's context for the query in the URL, its status, and the form."""
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
    return context, status, form


@require_GET
def hub_list(request):
    """The searchable list. A visitor's page at the bare address is kept (``core.visitor_cache``)."""
    if wants_partial(request):
        context, status, _form = _hub_results(request)
        return render(request, f"{LIST_CONTENT}#results", context, status=status)

    def build():
        context, status, form = _hub_results(request)
        return render_to_string(LIST_CONTENT, context | _menus(form), request), status

    content, status = visitor_cache.content(request, "hub-list", build, seconds=LIST_SECONDS)
    return render(request, LIST_TEMPLATE, {"content": content}, status=status)


def _item_or_404(request, org: str, name: str):
    try:
        return services.get_item(request.user, f"{org}/{name}")
    except NotFound as exc:
        raise Http404(exc.message) from exc


def _shown_to_all(item, book) -> dict:
    """What a repository's page shows that is the same for everyone with the same prices: its files and latest
    commits at its head, and the cheapest chip of each family it runs on. Kept per head and price book state for
    ``LIST_SECONDS``, renewed at once when the item is saved."""

    def build():
        return {
            "files": list(services.files_of(item)),
            "commits": repos.history(item, 10) if item.has_bytes else [],
            "chip_prices": services.chip_prices(item, book),
        }

    return visitor_cache.kept("hub-list", build, seconds=LIST_SECONDS, parts=(item.pk, item.head_id, book.state()))


def _mount_choices(user, item) -> list[dict]:
    """The user's instances that can take a mount now (running, starting or stopped…), newest first, each with
    whether ``item`` is already mounted there."""
    if not user.is_authenticated:
        return []
    instances = Instance.objects.for_user(user, "change").not_endpoints().filter(status__in=MOUNTABLE)
    if item.owner_id is not None and item.visibility != HubVisibility.PUBLIC:
        instances = instances.filter(owner_id=item.owner_id)  # a private item goes only into its owner's machines
    mounted = Exists(HubMount.objects.filter(instance=OuterRef("pk"), repo=item.repo))
    shown = instances.only("pk", "public_id", "name", "status", "created_at").annotate(mounted=mounted)
    return [{"instance": i, "mounted": i.mounted} for i in shown[:MOUNT_CHOICES]]


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
    shown = _shown_to_all(item, load_price_book(**priced_for(request)))
    files, chip_prices = shown["files"], shown["chip_prices"]
    publisher = request.user.is_authenticated and item.owner_id == request.user.pk
    context = {
        "item": item,
        "files": files,
        "files_total": sum(f.size_bytes for f in files),
        "commits": shown["commits"],
        "publisher": publisher,
        "upload_form": HubUploadForm() if publisher else None,
        "hub_endpoint": request.build_absolute_uri("/").rstrip("/"),
        "resolve_prefix": ("" if item.kind == "model" else "/datasets") + f"/{item.repo}/resolve/main/",
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


# Publishing from the browser -----------------------------------------------------------------------------------


@login_required
@require_http_methods(["GET", "POST"])
def hub_new(request):
    """Create a repository under one's namespace, then upload to it from its page (or with huggingface_hub)."""
    form = HubRepoForm(request.POST or None)
    if request.method == "POST":
        if form.is_valid():
            data = form.cleaned_data
            try:
                item = repos.create_repo(
                    request.user,
                    name=data["name"].strip(),
                    private=data["private"],
                    organization=data["namespace"].strip(),
                    kind=data["kind"],
                )
            except ServiceError as exc:
                form.add_error(None, exc.message)
            else:
                messages.success(request, _("Repository %(repo)s created: upload its files.") % {"repo": item.repo})
                return redirect("marketplace:hub-item", org=item.org, name=item.name)
        return render(request, "marketplace/hub/new.html", {"form": form}, status=400)
    return render(request, "marketplace/hub/new.html", {"form": form})


def _publishable(request, org, name):
    item = _item_or_404(request, org, name)
    if item.owner_id != request.user.pk:
        raise PermissionDenied(_("Only the repository's owner can change it."))
    return item


@login_required
@require_POST
def hub_visibility(request, org: str, name: str):
    """Make one of the user's repositories private or public."""
    item = _publishable(request, org, name)
    private = request.POST.get("private") == "true"
    repos.set_visibility(request.user, item.kind, item.repo, private)
    messages.success(request, _("The repository is now private.") if private else _("The repository is now public."))
    return redirect("marketplace:hub-item", org=item.org, name=item.name)


def _clean_folder(text: str) -> str:
    return "/".join(part for part in (text or "").replace("\\", "/").split("/") if part not in ("", ".")).strip()


@login_required
@require_POST
def hub_upload(request, org: str, name: str):
    """Commit the files a browser sends (several at once) with a message."""
    item = _publishable(request, org, name)
    form = HubUploadForm(request.POST)
    uploads = request.FILES.getlist("files")
    if not form.is_valid() or not uploads:
        messages.error(request, _("Choose at least one file and give a commit message."))
        return redirect("marketplace:hub-item", org=item.org, name=item.name)
    if sum(f.size for f in uploads) > settings.HUB_MAX_FILE_BYTES:
        messages.error(request, _("The files are larger than the hub accepts."))
        return redirect("marketplace:hub-item", org=item.org, name=item.name)
    folder = _clean_folder(form.cleaned_data["folder"])
    pairs = [(f"{folder}/{f.name}" if folder else f.name, f) for f in uploads]
    try:
        made = repos.commit_uploads(request.user, item, form.cleaned_data["message"], pairs)
    except ServiceError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(
            request, _("Committed %(count)s files as %(oid)s.") % {"count": len(pairs), "oid": made.oid[:7]}
        )
    return redirect("marketplace:hub-item", org=item.org, name=item.name)


@login_required
@require_POST
def hub_from_storage(request, org: str, name: str):
    """Commit a file from the user's cloud storage (uploaded there resumably) into the repository."""
    item = _publishable(request, org, name)
    form = HubUploadForm(request.POST)
    storage_path = request.POST.get("storage_path", "").strip()[:1000]
    if not form.is_valid() or not storage_path:
        messages.error(request, _("Give the file's path in your cloud storage and a commit message."))
        return redirect("marketplace:hub-item", org=item.org, name=item.name)
    try:
        made = repos.commit_from_storage(
            request.user, item, form.cleaned_data["message"], storage_path, _clean_folder(form.cleaned_data["folder"])
        )
    except ServiceError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, _("Committed %(count)s files as %(oid)s.") % {"count": 1, "oid": made.oid[:7]})
    return redirect("marketplace:hub-item", org=item.org, name=item.name)


@login_required
@require_http_methods(["GET", "POST"])
def hub_card(request, org: str, name: str):
    """Edit the card (README.md, with its YAML front matter): saving commits it."""
    item = _publishable(request, org, name)
    text = request.POST.get("card", item.card) if request.method == "POST" else item.card
    if request.method == "POST":
        try:
            repos.commit_card(request.user, item, str(text)[:200_000], request.POST.get("message", "")[:500])
        except (ServiceError, Forbidden) as exc:
            return render(
                request,
                "marketplace/hub/card_edit.html",
                {"item": item, "card": text, "error": exc.message},
                status=400,
            )
        messages.success(request, _("Card saved as a new commit."))
        return redirect("marketplace:hub-item", org=item.org, name=item.name)
    return render(request, "marketplace/hub/card_edit.html", {"item": item, "card": text})


HUB_MOUNT_RESULTS = 10


@login_required
@require_GET
def hub_mount_search(request):
    """Hub items matching ``q`` (Chinese or English) for the mount pickers: the instance panel's and the wizard's.
    With ``instance``, each result mounts into that instance (the caller's own; anything else is a 404)."""
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
