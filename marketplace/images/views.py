"""Image marketplace pages: browse and search, an image with its chips and live prices, one-click clone, clone to
my images, save an instance as an image, publish, rate, the author's earnings and the staff review queue."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import Http404
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from accounts.ops import roles
from accounts.ops.access import staff_view
from accounts.ops.audit import client_ip
from billing.quote import load_price_book
from core import visitor_cache
from core.errors import Forbidden, NotFound, ServiceError
from core.htmx import wants_partial
from teams import roles as team_roles
from teams.accounts import team_name
from teams.context import acting, priced_for

from ..choices import ImageCategory, OperatingSystem
from ..models import Image
from . import clone, imports, services
from .forms import (
    FAMILY_CHOICES,
    IMAGE_FAMILY_CHOICES,
    ImageFamilyForm,
    ImageSearchForm,
    ImportImageForm,
    RatingForm,
    ReviewForm,
    SaveImageForm,
)

LIST_TEMPLATE = "marketplace/images/list.html"
LIST_CONTENT = "marketplace/images/_list_content.html"
# How long a visitor's page of the marketplace is kept at most: its counts (launches, ratings) may lag that long; an
# image saved, deleted, listed or rejected is a new generation of the page at once.
LIST_SECONDS = 30
DETAIL_TEMPLATE = "marketplace/images/detail.html"
DETAIL_CONTENT = "marketplace/images/_detail_content.html"
PAGE_SIZE = 24


def _form_errors(form) -> str:
    return " ".join(f"{form[name].label}: {' '.join(errors)}" for name, errors in form.errors.items())


def _search_results(request, *, mine: bool) -> tuple[dict, int]:
    """The list's context for the query in the URL, and its status."""
    form = ImageSearchForm(request.GET)
    context = {"form": form, "page": None, "error": "", "mine": mine}
    status = 200
    if form.is_valid():
        try:
            query = form.image_query(services.family_of_chip)
            account = acting(request).account if mine else None
            images = services.search_images(request.user, query, form.sort_order(), mine=mine, account=account)
            context["page"] = Paginator(images, PAGE_SIZE).get_page(request.GET.get("page"))
        except ServiceError as exc:
            context["error"], status = str(exc.message), exc.status
    else:
        context["error"], status = _form_errors(form), 400
    return context, status


def _search_page(request, *, mine: bool):
    """The marketplace or my images. A visitor's page of the marketplace at the bare address is kept
    (``core.visitor_cache``)."""
    if wants_partial(request):
        context, status = _search_results(request, mine=mine)
        return render(request, f"{LIST_CONTENT}#results", context, status=status)

    def build():
        context, status = _search_results(request, mine=mine)
        menus = {
            "categories": ImageCategory.choices,
            "families": FAMILY_CHOICES[1:],
            "frameworks": services.framework_options(),
            "systems": OperatingSystem.choices,
        }
        return render_to_string(LIST_CONTENT, context | menus, request), status

    content, status = visitor_cache.content(request, services.VISITOR_PAGES, build, seconds=LIST_SECONDS)
    return render(request, LIST_TEMPLATE, {"content": content, "mine": mine}, status=status)


@require_GET
def image_list(request):
    return _search_page(request, mine=False)


@login_required
@require_GET
def my_images(request):
    return _search_page(request, mine=True)


def _image_or_404(request, slug, action="view"):
    try:
        return services.get_image(request.user, slug, action)
    except NotFound as exc:
        raise Http404(str(exc.message)) from exc
    except Forbidden as exc:  # a team's image, and a role that may only see it
        raise PermissionDenied(str(exc.message)) from exc


def _shown_to_all(image, token: str) -> dict:
    """What an image's page shows that is the same for everyone: its variants, the chips offered for their families
    and the latest ratings. Kept for ``LIST_SECONDS`` at most and renewed at once when the image, a variant or a
    rating changes (``services.VISITOR_PAGES``); prices are worked out from them on every view, the cards free read at
    most every ``services.FREE_CARDS_SECONDS``."""

    def build():
        variants = list(image.variants.all())
        return {
            "variants": variants,
            "chips": services.offered_chips(variants),
            "ratings": list(services.ratings_of(image)),
        }

    return visitor_cache.kept(services.VISITOR_PAGES, build, seconds=LIST_SECONDS, parts=(image.pk,), token=token)


def _detail_context(request, image, book) -> dict:
    token = visitor_cache.generation(services.VISITOR_PAGES)  # the page's shared parts are kept under it
    shown = _shown_to_all(image, token)
    variants = shown["variants"]
    chips = shown["chips"]
    offers = services.chip_offers(image, book, variants=variants, chips=chips, free=services.shown_free_cards(chips))
    is_owner = image.owner_id is not None and image.owner_id == request.user.pk
    # A team's private image: its operators may publish it; it launches in the team's context only.
    team_image = services.team_private(request.user, image)
    if team_image:
        is_owner = Image.objects.for_user(request.user, "change").filter(pk=image.pk).exists()
    elsewhere = team_image and acting(request).account.pk != image.owner_id
    return {
        "image": image,
        "variants": variants,
        "offers": offers,
        "clone_offer": clone.clone_offer(offers),
        "launch_url": clone.launch_url(image, offers) if image.is_ready and not elsewhere else None,
        "launch_in_team": team_name(image.owner_id) if elsewhere else "",
        "is_owner": is_owner,
        "can_rate": not is_owner and services.ran_image(request.user, image, variants),
        "ratings": shown["ratings"],
        # The key of the page's parts that are the same for everyone ({% cache %} in the template).
        "generation": token,
        "kept_seconds": LIST_SECONDS,
        "events": list(services.events_of(image)) if is_owner or request.user.is_staff else [],
        "rating_form": RatingForm(),
        "review_form": ReviewForm() if request.user.is_staff else None,
    } | _family_context(image)


def _family_context(image) -> dict:
    """An imported image's chip families in words: those whose libraries it holds, the one they suggest, and the
    choices of the owner's confirmation."""
    record = getattr(image, "imported", None)
    if record is None:
        return {}
    labels = dict(IMAGE_FAMILY_CHOICES)
    return {
        "family_choices": IMAGE_FAMILY_CHOICES,
        "found_families": [labels.get(family, family) for family in record.checks.get("families", [])],
        "suggested_family": labels.get(record.checks.get("family", ""), ""),
    }


@require_GET
def image_detail(request, slug):
    """An image's page. A visitor's page is kept (``core.visitor_cache``) per price book; a change to the image
    shows at once, its counts (launches, ratings, free cards) within ``LIST_SECONDS``."""
    image = _image_or_404(request, slug)
    if wants_partial(request):
        return render(request, f"{DETAIL_CONTENT}#status", {"image": image})
    book = load_price_book(**priced_for(request))

    def build():
        return render_to_string(DETAIL_CONTENT, _detail_context(request, image, book), request), 200

    content, status = visitor_cache.content(
        request, services.VISITOR_PAGES, build, seconds=LIST_SECONDS, parts=(image.pk, book.public_state())
    )
    return render(request, DETAIL_TEMPLATE, {"image": image, "content": content}, status=status)


def _back(request, image, error: str = ""):
    if error:
        messages.error(request, error)
    return redirect(image)


@login_required
@require_POST
def image_clone(request, slug):
    """ "Clone to my images": a private copy the user can launch, describe and publish."""
    image = _image_or_404(request, slug)
    try:
        copy = services.clone_to_mine(request.user, image)
    except Forbidden as exc:
        raise PermissionDenied(str(exc.message)) from exc
    except ServiceError as exc:
        return _back(request, image, str(exc.message))
    messages.success(request, _("“%(name)s” is now in your images (private).") % {"name": copy.name})
    return redirect(copy)


@login_required
@require_POST
def image_publish(request, slug):
    image = _image_or_404(request, slug, action="change")
    try:
        services.publish(request.user, image)
    except ServiceError as exc:
        return _back(request, image, str(exc.message))
    messages.success(request, _("Submitted for review: staff list it or tell you why not."))
    return redirect(image)


@login_required
@require_POST
def image_family(request, slug):
    """The owner confirms (or corrects) the chip family an imported image is for."""
    image = _image_or_404(request, slug, action="change")
    form = ImageFamilyForm(request.POST)
    if not form.is_valid():
        return _back(request, image, _form_errors(form))
    try:
        imports.confirm_family(request.user, image, form.cleaned_data["family"])
    except ServiceError as exc:
        return _back(request, image, str(exc.message))
    messages.success(request, _("The image's chip family is saved."))
    return redirect(image)


@login_required
@require_POST
def image_rate(request, slug):
    image = _image_or_404(request, slug)
    form = RatingForm(request.POST)
    if not form.is_valid():
        return _back(request, image, _form_errors(form))
    try:
        services.rate(request.user, image, form.cleaned_data["stars"], form.cleaned_data["comment"])
    except ServiceError as exc:
        return _back(request, image, str(exc.message))
    messages.success(request, _("Thank you for rating this image."))
    return redirect(image)


@login_required
@require_http_methods(["GET", "POST"])
def save_instance(request, instance_id):
    """Save a stopped instance as a private image: the size is shown first; the snapshot runs in a task."""
    form = SaveImageForm(request.POST or None)
    context = {"form": form, "instance_id": instance_id, "error": ""}
    try:
        from instances.lifecycle import get_instance

        context["instance"] = get_instance(request.user, instance_id)
    except NotFound as exc:
        raise Http404(str(exc.message)) from exc
    try:
        context["size"] = services.snapshot_size(request.user, instance_id)
    except Forbidden as exc:  # a team's instance, and a role that may only see it
        raise PermissionDenied(str(exc.message)) from exc
    except ServiceError as exc:
        context["error"] = str(exc.message)
    if request.method == "POST" and not context["error"] and form.is_valid():
        try:
            image = services.save_instance_as_image(request.user, instance_id, **form.cleaned_data)
        except ServiceError as exc:
            context["error"] = str(exc.message)
        else:
            messages.success(request, _("Saving the system disk as “%(name)s”…") % {"name": image.name})
            return redirect(image)
    status = 400 if request.method == "POST" else (409 if context["error"] else 200)
    return render(request, "marketplace/images/save.html", context, status=status)


@login_required
@require_http_methods(["GET", "POST"])
def import_image(request):
    """Import a container image from a registry: the task copies, unpacks and checks it; its page shows how far."""
    form = ImportImageForm(request.POST or None)
    error = ""
    if request.method == "POST" and form.is_valid():
        context = acting(request)
        try:
            context.require(team_roles.OPERATE)  # a team's read-only and billing members import nothing into it
            image = imports.start_import(request.user, **form.cleaned_data, owner=context.account)
        except ServiceError as exc:
            error = str(exc.message)
        else:
            messages.success(request, _("Importing “%(name)s”…") % {"name": image.name})
            return redirect(image)
    status = 400 if request.method == "POST" else 200
    return render(request, "marketplace/images/import.html", {"form": form, "error": error}, status=status)


@login_required
@require_GET
def earnings(request):
    context = services.earnings(request.user)
    return render(request, "marketplace/images/earnings.html", context)


@staff_view(roles.REVIEW_IMAGE)
@require_GET
def review_queue(request):
    images = list(services.pending_review().prefetch_related("variants"))
    return render(request, "marketplace/images/review.html", {"images": images, "form": ReviewForm()})


@staff_view(roles.REVIEW_IMAGE)
@require_POST
def review_decide(request, slug):
    image = _image_or_404(request, slug)
    form = ReviewForm(request.POST)
    if not form.is_valid():
        messages.error(request, _form_errors(form))
        return redirect("marketplace:review")
    approve = form.cleaned_data["decision"] == "approve"
    try:
        image = services.review_image(image, approve, form.cleaned_data["reason"], request.user, ip=client_ip(request))
    except roles.Forbidden:
        raise  # the 403 page (staff_view)
    except ServiceError as exc:
        messages.error(request, str(exc.message))
    else:
        state = image.get_review_state_display()
        messages.success(request, _("“%(name)s”: %(state)s.") % {"name": image.name, "state": state})
    return redirect("marketplace:review")
