"""The public pricing page with its live calculator (htmx) and the billing table per state."""

from django.conf import settings
from django.shortcuts import render
from django.template.loader import render_to_string
from django.views.decorators.http import require_GET

from catalog.models import Chip, InstanceSpec
from core import visitor_cache
from core.htmx import wants_partial
from teams.context import priced_for

from .. import pricing_table
from ..forms import DEFAULT_QUERY, NO_CARD, QuoteForm
from ..quote import load_price_book, storage_prices

TEMPLATE = "billing/pricing.html"
CONTENT = "billing/_pricing_content.html"


def _calculate(form, book, chips):
    """Parse the calculator and quote it: (quote, error message)."""
    if not form.is_valid():
        return None, " ".join(str(e) for errors in form.errors.values() for e in errors)
    data = form.cleaned_data
    chip = None if data["chip"] == NO_CARD else chips[data["chip"]]
    zones = {z.slug: z for offered in book.offers.values() for z in offered}
    return pricing_table.quote_or_error(
        chip=chip,
        cards=data["cards"] if chip else 0,
        zone=zones.get(data["zone"]) if data["zone"] else None,
        plan=data["plan"],
        spot=data["spot"],
        minutes=form.term_minutes(),
        book=book,
    )


def _storage_prices(prices) -> dict:
    """The per-GB-day prices of disks and cloud storage in force now (None when not published)."""
    return {
        "disk_price": prices.get("disk"),
        "cloud_storage_price": prices.get("storage"),
        "storage_free_gb": f"{settings.STORAGE_FREE_GB:g}",
    }


@require_GET
def pricing(request):
    """The price list and the calculator. What a visitor sees without a query is the same for everyone: it is kept
    per price book (its version and span, the programmes' budgets left), the disk and storage prices in force and
    the language, so an operator's change or a programme's spending shows on the next visit; a signed-in user's,
    per the state of their book as well."""
    book = load_price_book(**priced_for(request))
    if wants_partial(request):
        context, _status = _pricing_context(request, book, partial=True)
        return render(request, f"{CONTENT}#quote-breakdown", context)
    stored = storage_prices()

    def build():
        context, status = _pricing_context(request, book, stored=stored)
        return render_to_string(CONTENT, context, request), status

    in_force = tuple(sorted((resource, price.pk) for resource, price in stored.items()))
    if request.user.is_authenticated and not request.GET:
        # A signed-in user's list at its bare address is the same for everyone whose book has the same state (the
        # programmes that admit them, what they were subsidised this month): kept under that state.
        parts = (book.state(), in_force)
        content, status = visitor_cache.kept("pricing", build, seconds=3600, parts=parts)
    else:
        parts = (book.public_state(), in_force)
        content, status = visitor_cache.content(request, "pricing", build, seconds=3600, parts=parts)
    return render(request, TEMPLATE, {"content": content}, status=status)


def _pricing_context(request, book, *, partial=False, stored=None) -> tuple[dict, int]:
    chips = {chip.slug: chip for chip in Chip.objects.rentable()}
    zones = sorted({z.pk: z for offered in book.offers.values() for z in offered}.values(), key=lambda z: z.sort_order)
    # The calculator offers only chips with a price (the list below also names those not priced yet).
    priced = [chip for chip in chips.values() if book.price_for(chip.pk) is not None]
    form_kwargs = {"chips": priced, "zones": zones, "plans": book.plans.values()}
    submitted = "chip" in request.GET
    form = QuoteForm(request.GET if submitted else DEFAULT_QUERY, **form_kwargs)
    calculated, error = _calculate(form, book, chips)
    context = {"form": form, "quote": calculated, "error": error}
    status = 400 if error and submitted else 200
    if partial:
        return context, status
    chip_names = {chip.pk: chip.label for chip in chips.values()}
    context |= {
        "rows": pricing_table.price_table(book, chips.values()),
        "specs": pricing_table.spec_prices(book, InstanceSpec.objects.active().with_chip()),
        "programmes": [(p, [chip_names.get(i, "") for i in sorted(p.chip_ids)]) for p in book.programmes],
        "plans": book.plans.values(),
        "release_days": settings.STOPPED_RELEASE_DAYS,
        **_storage_prices(stored),
    }
    return context, status
