"""Launching an instance: check the request, the image and the balance, pick a chip and a node, reserve the
cards and create the instance in one transaction; provisioning runs in a task (``lifecycle.advance``)."""

import logging
import time
from dataclasses import dataclass
from datetime import datetime

from django.db import OperationalError, transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from billing.quote import Quote, load_price_book, quote, quote_disk
from catalog.models import Chip, InstanceSpec, Node, Zone
from catalog.services import get_chip, get_zone, zone_offers
from core.errors import Forbidden, ServiceError
from core.field_errors import FieldError
from core.validators import clean_display_name
from teams.access import reaches

from . import attachments, charges, conf, limits
from .backends import BackendError, get_backend
from .backends.base import SECRETS_NEED_OWN_ACCOUNT
from .capacity import (
    COMPUTE_SHORTAGE,
    NOTHING,
    CapacityError,
    demand_for,
    node_shortage,
    out_of_capacity,
    reclaim_from_spot,
    reserve,
    reserve_compute,
)
from .choices import (
    Backend,
    Reason,
    Status,
    TermEnd,
    Wanted,
)
from .environment import BootOptions, check_boot_options
from .images import get_image, hold, record_launch
from .lifecycle import _backend, _enqueue, _nodes_for, _spec_for, preempt
from .models import Instance, InstanceEvent

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class LaunchRequest:
    """What a launch asks for: ``chip`` (a slug) or ``backend`` (a family: the cheapest chip with free cards is
    picked) or ``no_card``; ``zone`` is optional (Xinchuang zone first)."""

    name: str
    image: str
    chip: str = ""
    backend: str = ""
    no_card: bool = False
    cards: int = 1
    zone: str = ""
    plan: str = "payg"
    spot: bool = False
    term_end_action: str = TermEnd.CONTINUE
    auto_shutdown_at: datetime | None = None
    idle_shutdown_minutes: int | None = None
    data_disk_gb: int = 0  # a new cloud disk attached to the instance (storage.disks); 0: none
    mounts: tuple[str, ...] | list[str] | str = ()  # hub repos to mount read-only (instances.attachments)
    # What it boots with (instances.environment): run with /bin/sh -c at every boot (empty: the image's default),
    # plain variables the owner sees again, and names of the owner's secrets whose values are injected.
    start_command: str = ""
    env: dict[str, str] | None = None
    secrets: tuple[str, ...] | list[str] = ()
    # Minutes after which the backend's scheduler ends the machine's job by itself (Slurm's --time); None: never.
    time_limit_minutes: int | None = None
    # Where the nodes' backend has a scheduler of its own (Slurm): when no card is free in the console's count, hand
    # the machine to that scheduler anyway, to wait in its queue; the console then reserves nothing for it.
    wait_in_cluster: bool = False
    # The figures behind an ``auto`` choice of the chip (``instances.choosing``), kept on the instance.
    choice: dict | None = None


@dataclass(frozen=True)
class Candidate:
    chip: Chip | None
    zone: Zone
    spec: InstanceSpec
    quote: Quote


def _clean_name(name: str) -> str:
    return clean_display_name(name, max_length=64, field_label=_("instance"))


def _candidate_chips(request: LaunchRequest) -> list[Chip]:
    if request.no_card:
        if request.chip or request.backend:
            raise ServiceError(_("No-card mode has no chip; leave chip and backend empty."), code="invalid_chip")
        return []
    if request.chip and request.backend:
        raise ServiceError(_("Give a chip or a backend family, not both."), code="invalid_chip")
    if request.chip:
        chip = get_chip(request.chip)
        if not chip.rentable:
            raise ServiceError(_("%(chip)s is not for rent.") % {"chip": chip.label}, code="not_rentable")
        return [chip]
    if request.backend:
        if request.backend not in Backend.values:
            raise ServiceError(
                _("Unknown backend “%(backend)s”: use one of %(names)s.")
                % {"backend": request.backend, "names": ", ".join(Backend.values)},
                code="unknown_backend",
            )
        return list(Chip.objects.rentable().filter(backend=request.backend))
    raise ServiceError(_("Choose a chip or a backend family (npu, mlu, dcu, cuda)."), code="invalid_chip")


def _candidates(request: LaunchRequest, user, book) -> list[Candidate]:
    """Every (chip, zone) the request may land in, cheapest first for a family, Xinchuang zone first for a chip."""
    chips = _candidate_chips(request)
    zone = get_zone(request.zone) if request.zone else None
    cards = request.cards
    if isinstance(cards, bool) or not isinstance(cards, int):
        raise ServiceError(_("The number of cards must be a whole number."), code="invalid_cards")
    if not chips:
        zone = zone or Zone.objects.active().order_by("sort_order", "slug").first()
        spec = _spec_for(None, 0)
        q = quote(spec=spec, zone=zone, plan=request.plan, spot=request.spot, user=user, book=book)
        return [Candidate(None, zone, spec, q)]
    offers = zone_offers()
    found, problem = [], None
    for chip in chips:
        spec = _spec_for(chip, cards)
        zones = [zone] if zone else [o.zone for o in offers.get(chip.pk, [])]
        for where in zones:
            try:
                q = quote(
                    chip=chip, cards=cards, zone=where, plan=request.plan, spot=request.spot, user=user, book=book
                )
            except ServiceError as exc:
                problem = exc
                continue
            found.append(Candidate(chip, where, spec, q))
    if not found:
        if problem is not None:
            raise problem
        raise out_of_capacity(_("%(cards)s× %(chip)s") % {"cards": cards, "chip": chips[0].label}, cards=cards)
    if request.backend:
        found.sort(key=lambda c: c.quote.payable_per_hour)
    return found


def _nodes_backend(nodes) -> str:
    return nodes.values_list("backend_name", flat=True).first() or "simulated"


def _zone_backend(zone: Zone) -> str:
    return Node.objects.filter(zone=zone).values_list("backend_name", flat=True).first() or "simulated"


def launch(user, request: LaunchRequest, *, by=None) -> Instance:
    """Check the request and the balance, reserve the cards and create the instance; provisioning runs in a task.

    Raises ServiceError (400) for bad input (a FieldError naming the field for the start command, the variables and
    the secrets), PaymentRequired (402) without one hour of balance (or the prepaid term), CapacityError (503)
    naming where cards are free when no node has room. ``user`` owns the instance and pays for it (a person, or a
    team's account); ``by`` is the person who asked, the owner when omitted.
    """
    if by is not None and by.pk != user.pk and not reaches(by, user.pk, "change"):
        # Checked here, not only by the page or API that took the request: a launch that waited in the queue, or a
        # job or a schedule, runs later, when the person may have left the team or lost the right to operate.
        raise Forbidden(
            _("Who asked for it may no longer launch in this account (no longer a member, or a role that cannot)."),
            code="may_not_launch",
        )
    name = _clean_name(request.name)
    if request.term_end_action not in TermEnd.values:
        raise ServiceError(_("Choose what happens when a prepaid term ends."), code="invalid_term_end")
    boot = check_boot_options(user, start_command=request.start_command, env=request.env, secret_names=request.secrets)
    book = load_price_book(user=user, person=by)
    candidates = _candidates(request, user, book)
    family = candidates[0].chip.backend if candidates[0].chip else None
    image = get_image(request.image, family, user)
    _check_shutdown(request.auto_shutdown_at, request.idle_shutdown_minutes)
    attachments.check_launch(user, request)
    shortage = None
    for candidate in candidates:
        try:
            instance = _retried(_create, user, name, candidate, image.slug, request, book, boot, by or user)
        except CapacityError as exc:
            if exc.code not in COMPUTE_SHORTAGE:
                raise
            shortage = exc  # the cards are there but not the CPU or memory: another candidate may have both
            continue
        if instance is not None:
            record_launch(image.slug)
            return instance
    if shortage is not None:
        raise shortage
    what = _("%(cards)s× %(chip)s") % {"cards": request.cards, "chip": candidates[0].chip.label}
    raise out_of_capacity(what, chips=[c.chip for c in candidates], cards=request.cards)


def data_disk_per_hour(request: LaunchRequest):
    """What the launch's new data disk adds per hour (0 without one): counted with the machine against a member's
    budget."""
    return quote_disk(request.data_disk_gb).payable_per_hour if request.data_disk_gb else 0


RETRIED_SQLSTATES = frozenset({"40P01", "40001"})  # PostgreSQL: deadlock detected, serialization failure


def _retried(create, *args, attempts: int = 3):
    """``create(*args)`` run again when PostgreSQL broke a deadlock or a serialization conflict by aborting its
    transaction (two launches reclaiming each other's spot cards lock both owners' wallets in opposite orders): the
    transaction was rolled back whole, so running it again is safe. Anything else, and the last failure, goes on."""
    for attempt in range(attempts):
        try:
            return create(*args)
        except OperationalError as exc:
            state = getattr(exc.__cause__, "sqlstate", None)
            if (
                state not in RETRIED_SQLSTATES
                or attempt == attempts - 1
                or transaction.get_connection().in_atomic_block  # a caller's transaction is lost with it
            ):
                raise
            time.sleep(0.05 * (attempt + 1))
    raise AssertionError("unreachable")


def _create(
    user, name, candidate: Candidate, image: str, request: LaunchRequest, book, boot: BootOptions, by
) -> Instance | None:
    plan = book.plans[candidate.quote.plan_slug]
    with transaction.atomic():
        # A quote's default term is one hour: one hour of pay-as-you-go, or one whole prepaid period. The check
        # locks the owner's wallet until this launch commits, so concurrent launches see each other.
        charges.check_launch_funds(user, candidate.quote, by=by, extra_per_hour=data_disk_per_hour(request))
        # Under the wallet lock the funds check took: concurrent launches of one account count each other.
        limits.check_launch(user, cpu_only=candidate.chip is None)
        hold(image)  # the image is not removed under the instance about to boot from it
        node, victims, demand, held = None, [], NOTHING, False
        if candidate.chip is not None:
            nodes = _nodes_for(candidate.chip, candidate.zone)
            demand = demand_for(_nodes_backend(nodes), candidate.spec)
            node = reserve(nodes, request.cards, demand)
            held = node is not None
            if node is None and request.wait_in_cluster:
                # The cluster's scheduler preempts spot jobs by its own partition priorities: no reclaim here.
                node = _queued_in_cluster(nodes, request.cards)
            elif node is None and not request.spot:
                node, victims = reclaim_from_spot(nodes, request.cards, demand) or (None, [])
                held = node is not None
            if node is None:
                shortage = node_shortage(nodes, request.cards, demand)
                if shortage is not None:
                    raise shortage  # rolls back this transaction; the next candidate may have room
                return None
        backend_name = node.backend_name if node else _zone_backend(candidate.zone)
        _check_secrets_kept_apart(backend_name, candidate.zone, boot)
        instance = Instance.objects.create(
            owner=user,
            launched_by=by,
            name=name,
            zone=candidate.zone,
            chip=candidate.chip,
            spec=candidate.spec,
            cards=candidate.spec.cards,
            node=node,
            reserved_cards=candidate.spec.cards if held else 0,
            plan=plan,
            reserved_cpu_millis=demand.cpu_millis if held else 0,
            reserved_memory_mb=demand.memory_mb if held else 0,
            spot=request.spot,
            term_end_action=request.term_end_action,
            image=image,
            backend_name=backend_name,
            auto_shutdown_at=request.auto_shutdown_at,
            idle_shutdown_minutes=request.idle_shutdown_minutes,
            time_limit_minutes=request.time_limit_minutes,
            status_reason=Reason.LAUNCHED,
            wanted=Wanted.RUNNING,
            price_per_hour=candidate.quote.payable_per_hour,
            start_command=boot.start_command,
            env=boot.env,
            secret_names=list(boot.secret_names),
            choice=request.choice or {},
        )
        InstanceEvent.objects.create(
            instance=instance,
            old="",
            new=Status.CREATING,
            reason=Reason.LAUNCHED,
            at=instance.created_at,
            detail=node.name if node else "",
            data={"payable_per_hour": str(candidate.quote.payable_per_hour)},
        )
        if candidate.chip is None:
            nodes = Node.objects.schedulable().filter(zone=candidate.zone, backend_name=backend_name)
            reserve_compute(instance, candidate.spec, nodes)
        attachments.at_launch(instance, request)
        for victim in victims:
            _reclaim(victim)
        _enqueue("provision", instance, Wanted.RUNNING)
    return instance


def _queued_in_cluster(nodes, cards: int) -> Node | None:
    """A node of ``nodes`` large enough for ``cards``, when a scheduler of its backend's own queues machines: the
    machine waits there for its cards. None otherwise (the launch is out of capacity as usual)."""
    node = nodes.filter(drained=False, cards__gte=cards).select_related("zone", "chip").order_by("pk").first()
    return node if node is not None and get_backend(node.backend_name).has_scheduler else None


def _check_secrets_kept_apart(backend_name: str, zone: Zone, boot: BootOptions) -> None:
    """Secrets go only to machines that run apart from other owners' (FieldError on ``secrets`` otherwise; the
    transaction rolls the reservation back)."""
    if boot.secret_names and not get_backend(backend_name).isolates_owners(zone):
        raise FieldError("secrets", str(SECRETS_NEED_OWN_ACCOUNT), code="secrets_on_shared_account")


def _reclaim(victim: Instance) -> None:
    """Preempt a spot instance whose cards an on-demand launch took: billing stops now, the checkpoint signal and
    the notice window follow (after commit), disks are kept, and the owner can relaunch it with one click."""

    def signal() -> None:
        # On commit (never while the node row is locked, never for a launch that rolled back), and before the
        # provision task is enqueued, so the on-demand machine's start sees the notice window. The preempted step
        # retries when this fails.
        try:
            _backend(victim).preempt(victim, notice_seconds=conf.spot_notice_seconds())
        except BackendError as exc:
            logger.warning("preempting %s for an on-demand launch: %s (the reconcile retries)", victim.public_id, exc)

    transaction.on_commit(signal)
    preempt(victim, detail=_("its cards were reclaimed for an on-demand instance"))


def _check_shutdown(at, idle_minutes) -> None:
    if at is not None and at <= timezone.now():
        raise ServiceError(_("The auto-shutdown time must be in the future."), code="invalid_auto_shutdown")
    if idle_minutes is not None and not 5 <= idle_minutes <= 7 * 24 * 60:
        raise ServiceError(_("Idle minutes must be between 5 and 10080 (a week)."), code="invalid_auto_shutdown")


def preview(user, request: LaunchRequest, *, by=None) -> Quote:
    """The price the wizard shows for ``request`` (the chip the launch would pick first), or ServiceError; ``by``
    as for :func:`launch`."""
    candidates = _candidates(request, user, load_price_book(user=user, person=by))
    get_image(request.image, candidates[0].chip.backend if candidates[0].chip else None, user)
    return candidates[0].quote
