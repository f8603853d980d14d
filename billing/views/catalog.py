"""Public catalog pages: the chip comparison and the training estimator."""

from django.shortcuts import render
from django.views.decorators.http import require_GET

from catalog.models import Chip
from core.htmx import wants_partial
from teams.context import priced_for

from .. import estimator
from ..comparison import comparison
from ..forms import ESTIMATOR_QUERY, EstimatorForm
from ..quote import load_price_book


@require_GET
def chips(request):
    book = load_price_book(**priced_for(request))
    charts = comparison(Chip.objects.all().with_figures(), book)
    return render(request, "billing/chips.html", {"charts": charts})


@require_GET
def estimator_page(request):
    submitted = "params_b" in request.GET
    form = EstimatorForm(request.GET if submitted else ESTIMATOR_QUERY)
    result = None
    if form.is_valid():
        result = estimator.estimate_training(form.job(), user=request.user, **form.estimate_on())
    context = {
        "form": form,
        "result": result,
        "assumptions": estimator.assumptions(),
        "bytes_per_parameter": estimator.BYTES_PER_PARAMETER,
    }
    template = "billing/estimator.html#estimate" if wants_partial(request) else "billing/estimator.html"
    status = 400 if form.errors and not wants_partial(request) else 200
    return render(request, template, context, status=status)
