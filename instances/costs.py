"""What an instance has cost so far (from its events, by the billing rules) and its training curves."""

import logging
from decimal import Decimal

from django.utils import timezone

from billing.money import ZERO, to_cents
from billing.rules import run_cost

from .choices import (
    Reason,
    Status,
)
from .lifecycle import _backend
from .models import Instance

logger = logging.getLogger(__name__)


def training_curves(instance: Instance) -> dict:
    """The training curves for the instance page and the API: tag → [[step, value], …], and whether simulated."""
    backend = _backend(instance)
    curves = backend.training_curves(instance)
    return {"simulated": backend.simulated, "curves": {tag: [[s, v] for s, v in pts] for tag, pts in curves.items()}}


def cost_so_far(instance: Instance, events=None) -> Decimal:
    """What the running time has cost, from the events: each run's started minutes at the rate frozen when it
    started (the same rule metering charges by). Prepaid terms add what was paid up front. ``events`` may come in
    any order (the page lists them newest first)."""
    events = sorted(events if events is not None else instance.events.all(), key=lambda e: (e.at, e.pk))
    total, started, rate = ZERO, None, None
    for event in events:
        if event.reason == Reason.TERM_RENEWED:
            total += Decimal(event.data.get("payable_total", "0"))
        if event.new == Status.RUNNING and event.old != Status.RUNNING:
            started, rate = event.at, _rate(event)
        elif event.reason == Reason.TERM_CONTINUED:
            started, rate = event.at, _rate(event)
        elif started and event.old == Status.RUNNING and event.new != Status.RUNNING:
            total += _run_cost(started, event.at, rate)
            started = None
    if started and instance.status == Status.RUNNING:
        total += _run_cost(started, timezone.now(), rate)
    return to_cents(total)


def _rate(event) -> Decimal | None:
    if event.data.get("plan", "payg") != "payg" and event.reason != Reason.TERM_CONTINUED:
        return None  # prepaid: paid up front
    return Decimal(event.data["payable_per_hour"]) if "payable_per_hour" in event.data else None


def _run_cost(start, end, rate) -> Decimal:
    return ZERO if rate is None else run_cost(rate, start, end)
