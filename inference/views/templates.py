"""Inference template pages: the list (grouped by model) and a template's page with its chips and prices."""

from django.http import Http404
from django.shortcuts import render
from django.views.decorators.http import require_GET

from billing.quote import load_price_book
from catalog.models import Chip
from core.errors import NotFound

from .. import template_catalog as services


@require_GET
def template_list(request):
    user = request.user if request.user.is_authenticated else None
    book = load_price_book(user=user)
    chips = list(Chip.objects.offered())
    rows = [(t, services.offers(t, book, user=user, chips=chips)) for t in services.templates()]
    return render(request, "inference/template_list.html", {"rows": rows})


@require_GET
def template_detail(request, slug):
    try:
        template = services.get_template(slug)
    except NotFound as exc:
        raise Http404(exc.message) from exc
    user = request.user if request.user.is_authenticated else None
    offers = services.offers(template, load_price_book(user=user), user=user)
    context = {"template": template, "offers": offers, "refusal": services.card_refusal(template)}
    return render(request, "inference/template_detail.html", context)
