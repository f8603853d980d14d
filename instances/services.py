"""The operations on instances — the only writers of their state — for pages, the API, the admin and tasks.

Each operation lives in the module a reader looks in: ``launching`` (check, pick a chip and a node, reserve,
create), ``lifecycle`` (start, stop, release, preemption, arrears stops, and the steps that tasks and reconcile
take), ``housekeeping`` (auto-shutdown, prepaid terms, the release countdown), ``costs`` (cost so far, training
curves) and ``logs`` (the tail of what the start command wrote). This module names them all in one place.
"""

from billing.quote import quote
from catalog.services import Offer, add_node, get_chip, get_zone, zone_offers

from .costs import cost_so_far, training_curves
from .housekeeping import _auto_shutdown, housekeeping
from .launching import Candidate, LaunchRequest, _check_shutdown, launch, preview
from .lifecycle import (
    advance,
    get_instance,
    instance_quote,
    preempt,
    reconcile,
    release,
    start,
    stop,
    stop_for_arrears,
)
from .logs import read_logs

__all__ = [
    "Candidate",
    "LaunchRequest",
    "Offer",
    "_auto_shutdown",
    "_check_shutdown",
    "add_node",
    "advance",
    "cost_so_far",
    "get_chip",
    "get_instance",
    "get_zone",
    "housekeeping",
    "instance_quote",
    "launch",
    "preempt",
    "preview",
    "quote",
    "read_logs",
    "reconcile",
    "release",
    "start",
    "stop",
    "stop_for_arrears",
    "training_curves",
    "zone_offers",
]
