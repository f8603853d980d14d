"""Inference templates (SPEC §9): which templates exist, where each can run and at what price, and the seed.

A template's chips are its image variant's family, narrowed by ``InferenceTemplate.chips`` to those the model fits
on; a template of a CPU-only variant runs in the no-card mode. A template whose model needs a card cannot be
deployed where every node of its chips is on a backend without cards (the local backend's machines run on the CPU):
:func:`card_refusal` says why, on its page and when it is deployed. Deploying one is ``inference.services.deploy``;
these functions only read.
"""

import tomllib
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

from django.db import transaction
from django.utils.translation import gettext as _

from billing.quote import PriceBook, quote
from catalog.models import Chip, Node
from core.errors import NotFound, ServiceError
from instances.backends import get_backend
from marketplace.models import HubItem, ImageVariant

from .models import InferenceTemplate

CATALOG_FILE = Path(__file__).with_name("catalog.toml")


def templates():
    """Active templates with their model and variant, in catalogue order."""
    return InferenceTemplate.objects.filter(active=True).select_related("model", "variant__image")


def templates_for(item: HubItem) -> list[InferenceTemplate]:
    return list(templates().filter(model=item))


def get_template(slug: str) -> InferenceTemplate:
    """The active template ``slug``; a missing one is a 404 (pages) — deploy turns it into bad input."""
    template = templates().filter(slug=slug).first() if slug else None
    if template is None:
        raise NotFound(_("No such inference template."))
    return template


def chips_of(template: InferenceTemplate, chips: list[Chip] | None = None) -> list[Chip]:
    """The rentable chips ``template`` runs on (from ``chips`` when given, to save queries on list pages)."""
    pool = chips if chips is not None else list(Chip.objects.offered())
    family = template.variant.family
    return [c for c in pool if c.backend == family and c.rentable and (not template.chips or c.slug in template.chips)]


def node_backends() -> dict[int, set[str]]:
    """Chip id → the backends its nodes are on (one query, for pages and lists that ask :func:`card_refusal` often)."""
    found: dict[int, set[str]] = {}
    for chip_id, backend in Node.objects.values_list("chip_id", "backend_name").distinct():
        found.setdefault(chip_id, set()).add(backend)
    return found


def card_refusal(template: InferenceTemplate, backends_of: dict[int, set[str]] | None = None, chips=None) -> str:
    """Why ``template`` cannot be deployed on this console: its model needs a card and every node of its chips is on
    a backend whose machines have none. "" when it can (or when no node holds its chips: deploy says so).
    ``backends_of`` is :func:`node_backends` and ``chips`` the offered chips, when the caller has them."""
    if not template.needs_a_card:
        return ""
    backends_of = node_backends() if backends_of is None else backends_of
    backends = set().union(*(backends_of.get(chip.pk, set()) for chip in chips_of(template, chips)))
    if not backends or any(get_backend(name).has_cards for name in backends):
        return ""
    return _(
        "%(framework)s needs an accelerator card, and the machines here run on the CPU only: this model cannot be "
        "served here. The CPU demo template “tiny-demo-cpu” can."
    ) % {"framework": template.get_framework_display()}


@dataclass(frozen=True)
class TemplateOffer:
    chip: Chip | None  # None: the no-card mode (a CPU-only template)
    per_hour: Decimal | None  # payable per hour for the template's cards, after subsidies; None: not offered


def offers(template: InferenceTemplate, book: PriceBook, user=None, chips=None) -> list[TemplateOffer]:
    """Each compatible chip with its hourly price for the template's default cards, cheapest first; for a CPU-only
    template, the no-card mode's price."""
    if not template.needs_a_card:
        try:
            return [TemplateOffer(None, quote(chip=None, cards=0, plan="payg", user=user, book=book).payable_per_hour)]
        except ServiceError:
            return [TemplateOffer(None, None)]
    found = []
    for chip in chips_of(template, chips):
        try:
            q = quote(chip=chip, cards=template.cards, plan="payg", user=user, book=book)
        except ServiceError:
            found.append(TemplateOffer(chip, None))
            continue
        found.append(TemplateOffer(chip, q.payable_per_hour))
    return sorted(found, key=lambda o: (o.per_hour is None, o.per_hour or 0))


# The seed ----------------------------------------------------------------------------------------------------


def _entries() -> list[dict]:
    with CATALOG_FILE.open("rb") as fh:
        return tomllib.load(fh)["template"]


@transaction.atomic
def load(*, update: bool = False) -> dict[str, int]:
    """Create the seed templates whose model and image variant exist (run after ``load_hub`` and ``load_images``).
    Idempotent: existing templates are kept as staff edited them unless ``update``."""
    counts = {"created": 0, "existing": 0, "skipped": 0}
    models = {i.repo: i for i in HubItem.objects.filter(repo__in=[e["model"] for e in _entries()])}
    variants = {v.slug: v for v in ImageVariant.objects.filter(slug__in=[e["variant"] for e in _entries()])}
    for entry in _entries():
        model, variant = models.get(entry["model"]), variants.get(entry["variant"])
        if model is None or variant is None:
            counts["skipped"] += 1
            continue
        values = {
            "model": model,
            "framework": entry["framework"],
            "variant": variant,
            "chips": entry.get("chips", []),
            "cards": entry.get("cards", 1),
            "arguments": entry.get("arguments", ""),
            "sort_order": entry.get("sort_order", 100),
        }
        template, created = InferenceTemplate.objects.get_or_create(slug=entry["slug"], defaults=values)
        if not created and update:
            InferenceTemplate.objects.filter(pk=template.pk).update(**values)
        counts["created" if created else "existing"] += 1
    return counts
