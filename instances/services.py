"""Catalog operations (nodes under the Xinchuang rule, what each zone offers) and the instance lifecycle:
launch, start, stop, release, spot preemption, arrears stops, and the steps tasks and reconcile take."""

import logging
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal

from django.db import transaction
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext as _
from kombu.exceptions import OperationalError

from billing.money import ZERO, to_cents
from billing.quote import Quote, load_price_book, quote
from billing.rules import run_cost
from catalog.models import Chip, InstanceSpec, Node, Zone
from catalog.services import Offer, add_node, get_chip, get_zone, zone_offers  # noqa: F401  (the catalog reads, as instances use them)
from console.errors import Conflict, NotFound, ServiceError
from console.validators import clean_display_name

from . import attachments, billing, conf
from .backends import BackendError, Phase, TransientBackendError, get_backend
from .capacity import free, hold, out_of_capacity, reclaim_from_spot, reserve
from .choices import (
    LIVE,
    RELEASE_REMINDER_DAYS,
    RESTING,
    SPEC_CARD_COUNTS,
    STOPPED_RELEASE_DAYS,
    Backend,
    Reason,
    Status,
    TermEnd,
    Wanted,
)
from .images import get_image, record_launch
from .models import Instance, InstanceEvent
from .statemachine import check_move, note, transition

logger = logging.getLogger(__name__)


# The instance lifecycle ---------------------------------------------------------------------------------------
#
# User operations (launch, start, stop, release) check, reserve cards and move the state in one transaction, then
# enqueue a task on commit. Tasks and the reconcile beat call ``advance``, which looks at what the instance is,
# what its owner wants and what the backend says, and takes the next step. Every step is idempotent.


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


@dataclass(frozen=True)
class Candidate:
    chip: Chip | None
    zone: Zone
    spec: InstanceSpec
    quote: Quote


def get_instance(user, public_id, action: str = "view") -> Instance:
    """The caller's instance; someone else's and a missing one are the same 404."""
    try:
        key = uuid.UUID(str(public_id))
    except ValueError:
        key = None
    instance = Instance.objects.for_user(user, action).with_related().filter(public_id=key).first() if key else None
    if instance is None:
        raise NotFound(_("No such instance."))
    return instance


def _enqueue(task_name: str, instance: Instance, wanted: str) -> None:
    from . import tasks

    task = getattr(tasks, task_name)

    def send() -> None:
        try:
            task.delay(instance.pk, wanted)
        except (OperationalError, OSError):
            # The broker is down. The instance is committed with what it wants, so reconcile (every 15 s) finishes
            # the work once the broker is back; the user's request must not fail for it.
            logger.warning("broker unavailable: %s for instance %s left to reconcile", task_name, instance.pk)

    transaction.on_commit(send)


def _clean_name(name: str) -> str:
    return clean_display_name(name, max_length=64, field_label=_("instance"))


def _spec_for(chip: Chip | None, cards: int) -> InstanceSpec:
    spec = InstanceSpec.objects.active().filter(chip=chip, cards=cards if chip else 0).select_related("chip").first()
    if spec is None:
        counts = ", ".join(str(c) for c in SPEC_CARD_COUNTS)
        raise ServiceError(
            _("%(chip)s is offered with %(counts)s cards per instance, not %(cards)s.")
            % {"chip": chip.label if chip else _("No-card mode"), "counts": counts, "cards": cards},
            code="invalid_cards",
        )
    return spec


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
                q = quote(chip=chip, cards=cards, zone=where, plan=request.plan, spot=request.spot, user=user,
                          book=book)  # fmt: skip
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


def _nodes_for(chip: Chip, zone: Zone):
    return Node.objects.schedulable().filter(chip=chip, zone=zone)


def _zone_backend(zone: Zone) -> str:
    return Node.objects.filter(zone=zone).values_list("backend_name", flat=True).first() or "simulated"


def launch(user, request: LaunchRequest) -> Instance:
    """Check the request and the balance, reserve the cards and create the instance; provisioning runs in a task.

    Raises ServiceError (400) for bad input, PaymentRequired (402) without one hour of balance (or the prepaid
    term), CapacityError (503) naming where cards are free when no node has room.
    """
    name = _clean_name(request.name)
    if request.term_end_action not in TermEnd.values:
        raise ServiceError(_("Choose what happens when a prepaid term ends."), code="invalid_term_end")
    book = load_price_book(user=user)
    candidates = _candidates(request, user, book)
    family = candidates[0].chip.backend if candidates[0].chip else None
    image = get_image(request.image, family, user)
    _check_shutdown(request.auto_shutdown_at, request.idle_shutdown_minutes)
    attachments.check_launch(user, request)
    for candidate in candidates:
        instance = _create(user, name, candidate, image.slug, request, book)
        if instance is not None:
            record_launch(image.slug)
            return instance
    what = _("%(cards)s× %(chip)s") % {"cards": request.cards, "chip": candidates[0].chip.label}
    raise out_of_capacity(what, chips=[c.chip for c in candidates], cards=request.cards)


def _create(user, name, candidate: Candidate, image: str, request: LaunchRequest, book) -> Instance | None:
    plan = book.plans[candidate.quote.plan_slug]
    with transaction.atomic():
        # A quote's default term is one hour: one hour of pay-as-you-go, or one whole prepaid period. The check
        # locks the owner's wallet until this launch commits, so concurrent launches see each other.
        billing.check_launch_funds(user, candidate.quote)
        node, victims = None, []
        if candidate.chip is not None:
            nodes = _nodes_for(candidate.chip, candidate.zone)
            node = reserve(nodes, request.cards)
            if node is None and not request.spot:
                node, victims = reclaim_from_spot(nodes, request.cards) or (None, [])
            if node is None:
                return None
        instance = Instance.objects.create(
            owner=user, name=name, zone=candidate.zone, chip=candidate.chip, spec=candidate.spec,
            cards=candidate.spec.cards, node=node, reserved_cards=candidate.spec.cards if node else 0, plan=plan,
            spot=request.spot, term_end_action=request.term_end_action, image=image,
            backend_name=node.backend_name if node else _zone_backend(candidate.zone),
            auto_shutdown_at=request.auto_shutdown_at, idle_shutdown_minutes=request.idle_shutdown_minutes,
            status_reason=Reason.LAUNCHED, wanted=Wanted.RUNNING, price_per_hour=candidate.quote.payable_per_hour,
        )  # fmt: skip
        InstanceEvent.objects.create(
            instance=instance, old="", new=Status.CREATING, reason=Reason.LAUNCHED, at=instance.created_at,
            detail=node.name if node else "", data={"payable_per_hour": str(candidate.quote.payable_per_hour)},
        )  # fmt: skip
        attachments.at_launch(instance, request)
        for victim in victims:
            _reclaim(victim)
        _enqueue("provision", instance, Wanted.RUNNING)
    return instance


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


def instance_quote(instance: Instance, book=None, *, spec: InstanceSpec | None = None) -> Quote:
    """What running ``instance`` (or it with ``spec``) costs now: one hour, or one prepaid term. The price is
    frozen into the usage session when it starts running."""
    spec = spec or instance.spec
    return quote(spec=spec, zone=instance.zone, plan=instance.plan.slug, spot=instance.spot, user=instance.owner,
                 book=book)  # fmt: skip


# User operations --------------------------------------------------------------------------------------------


def stop(instance: Instance, *, reason: str = Reason.STOP_REQUESTED, detail: str = "") -> Instance:
    """Ask ``instance`` to stop: billing stops now; the backend sends the checkpoint signal and stops it after the
    grace period (in a task)."""
    now = timezone.now()
    was_running = instance.status == Status.RUNNING
    with transaction.atomic():
        transition(instance, Status.STOPPING, reason=reason, detail=detail, at=now, wanted=Wanted.STOPPED,
                   stop_requested_at=now)  # fmt: skip
        if was_running:
            billing.close_usage(instance.public_id, ended_at=now)
        _enqueue("stop", instance, Wanted.STOPPED)
    return instance


def start(instance: Instance, *, no_card: bool = False) -> Instance:
    """Start a stopped (or preempted, or failed) instance: on its node if it has room, else on another node of
    the zone (its disks follow), else — when asked — in no-card mode. Relaunching a preempted spot instance is
    this same operation."""
    check_move(instance, Status.STARTING)
    to_no_card = no_card and instance.chip_id is not None
    spec = _spec_for(None, 0) if to_no_card else instance.spec
    q = instance_quote(instance, spec=spec)
    in_paid_term = instance.term_ends_at is not None and instance.term_ends_at > timezone.now()
    with transaction.atomic():
        if not in_paid_term:
            billing.check_launch_funds(instance.owner, q, exclude=instance)
        # A spot instance relaunched in its notice window still holds its old cards: give them back first (its old
        # machine is being stopped anyway), so the reservation below is the only one it holds.
        free(instance)
        if to_no_card:
            _switch_to_no_card(instance, spec)
        detail = ""
        if instance.chip_id is not None:
            node = _reserve_for_restart(instance)
            if node.pk != instance.node_id:
                note(instance, Reason.MOVED, detail=_("from %(old)s to %(new)s") % {
                    "old": instance.node.name if instance.node else "—", "new": node.name})  # fmt: skip
            hold(instance, node, instance.cards)
            detail = node.name
        transition(instance, Status.STARTING, reason=Reason.START_REQUESTED, detail=detail, wanted=Wanted.RUNNING,
                   stop_requested_at=None, stopped_at=None, release_at=None, release_reminders_sent=0,
                   price_per_hour=q.payable_per_hour)  # fmt: skip
        _enqueue("start", instance, Wanted.RUNNING)
    return instance


def _reserve_for_restart(instance: Instance) -> Node:
    home = Node.objects.filter(pk=instance.node_id) if instance.node_id else Node.objects.none()
    node = reserve(home, instance.cards) or reserve(
        _nodes_for(instance.chip, instance.zone).exclude(pk=instance.node_id), instance.cards
    )
    if node is None:
        what = _("%(cards)s× %(chip)s in %(zone)s") % {
            "cards": instance.cards, "chip": instance.chip.label, "zone": instance.zone.label}  # fmt: skip
        raise out_of_capacity(what, chips=[instance.chip], cards=instance.cards, no_card_offered=True)
    return node


def _switch_to_no_card(instance: Instance, spec: InstanceSpec) -> None:
    # Every image boots on the CPU, so the instance keeps its image; its node stays its disks' home.
    Instance.objects.filter(pk=instance.pk, reserved_cards=0).update(chip=None, cards=0, spec=spec)
    instance.chip, instance.cards, instance.spec = None, 0, spec
    note(instance, Reason.NO_CARD_MODE)


def release(instance: Instance, *, reason: str = Reason.RELEASE_REQUESTED) -> Instance:
    """Release ``instance``: its system disk is deleted, data disks are kept (detached). Billing stops now."""
    now = timezone.now()
    was_running = instance.status == Status.RUNNING
    with transaction.atomic():
        transition(instance, Status.RELEASING, reason=reason, at=now, wanted=Wanted.RELEASED)
        if was_running:
            billing.close_usage(instance.public_id, ended_at=now)
        _enqueue("release", instance, Wanted.RELEASED)
    return instance


def preempt(instance: Instance, *, at=None, detail: str = "") -> Instance:
    """Reclaim a running spot instance: the checkpoint signal with the notice window, billing stops at the
    preemption minute, disks are kept; the owner can relaunch it with one click."""
    at = at or timezone.now()
    with transaction.atomic():
        transition(instance, Status.PREEMPTED, reason=Reason.PREEMPTED, detail=detail, at=at, wanted=Wanted.STOPPED,
                   stop_requested_at=at, stopped_at=at, release_at=at + RELEASE_AFTER)  # fmt: skip
        billing.close_usage(instance.public_id, ended_at=at)
        billing.notify(instance, "spot_preempted", notice=int(conf.spot_notice_seconds()))
        _enqueue("stop", instance, Wanted.STOPPED)
    return instance


def stop_for_arrears(user_id: int, reason: str) -> int:
    """Billing's arrears handler (registered in ``InstancesConfig.ready``): stop the user's pay-as-you-go
    instances with the checkpoint signal. ``reason`` names the cause (zero balance or the monthly spending cap).
    Returns how many."""
    code = Reason.SPENDING_CAP if "cap" in (reason or "").lower() else Reason.ARREARS
    stopped = 0
    instances = Instance.objects.with_related().filter(
        owner_id=user_id, status__in=[Status.RUNNING, Status.STARTING], plan__period_minutes=1
    )
    for instance in instances:
        try:
            stop(instance, reason=code, detail=reason or "")
        except Conflict:
            continue  # it moved meanwhile (a concurrent stop): nothing to do
        stopped += 1
    return stopped


# Driving instances towards what their owners want -----------------------------------------------------------

RELEASE_AFTER = timedelta(days=STOPPED_RELEASE_DAYS)


def advance(instance_id: int, wanted: str | None = None) -> float | None:
    """Take the next step for one instance. Returns seconds until it is worth looking again, or None when the
    instance is settled (or ``wanted`` no longer matches: a later request superseded the task)."""
    instance = Instance.objects.with_related().select_related("owner").filter(pk=instance_id).first()
    if instance is None or (wanted is not None and instance.wanted != wanted):
        return None
    step = _STEPS.get(instance.status)
    if step is None:
        return None
    try:
        return step(instance, None)
    except Conflict:
        return None  # another process moved it first; whoever did will finish the job


def _backend(instance: Instance):
    return get_backend(instance.backend_name)


def _submit(instance: Instance) -> bool:
    try:
        job_id = _backend(instance).submit(instance)
    except TransientBackendError:
        raise
    except BackendError as exc:
        _fail(instance, Reason.SUBMIT_FAILED, str(exc))
        return False
    if job_id != instance.backend_job_id:
        Instance.objects.filter(pk=instance.pk).update(backend_job_id=job_id)
        instance.backend_job_id = job_id
    attachments.apply(instance)  # /root/shared, data disks and hub mounts, on whichever node it landed
    return True


def _fail(instance: Instance, reason: str, detail: str = "", at=None) -> None:
    """A permanent failure: free the cards; nothing is charged for a launch that never became healthy."""
    was_running = instance.status == Status.RUNNING
    at = at or timezone.now()
    with transaction.atomic():
        transition(instance, Status.FAILED, reason=reason, detail=detail, at=at, wanted=Wanted.STOPPED,
                   stopped_at=at, release_at=at + RELEASE_AFTER)  # fmt: skip
        if was_running:
            billing.close_usage(instance.public_id, ended_at=at)
        free(instance)
    try:
        _backend(instance).stop(instance, grace_seconds=0)
    except BackendError:
        pass  # the machine is gone already


def _step_creating(instance: Instance, status) -> float | None:
    transition(instance, Status.STARTING, reason=Reason.SUBMITTED, detail=instance.node.name if instance.node else "")
    return _step_starting(instance, None)


def _step_starting(instance: Instance, status) -> float | None:
    status = status or _backend(instance).status(instance)
    if status.phase == Phase.RUNNING:
        _become_running(instance, status)
        return None
    if status.phase == Phase.FAILED:
        _fail(instance, Reason.NODE_LOST, status.message)
        return None
    if status.phase != Phase.BOOTING:  # never submitted, or a job left over from the previous run
        if not _submit(instance):
            return None
        status = _backend(instance).status(instance)
        if status.phase == Phase.RUNNING:
            _become_running(instance, status)
            return None
    _explain_wait(instance, status)
    started = instance.events.filter(new=Status.STARTING).order_by("-at").values_list("at", flat=True).first()
    if started and (timezone.now() - started).total_seconds() > conf.provision_timeout_seconds():
        minutes = int(conf.provision_timeout_seconds() // 60)
        _fail(instance, Reason.NEVER_HEALTHY, _("not healthy after %(minutes)s minutes") % {"minutes": minutes})
        return None
    return max(status.ready_in or 2.0, 0.2)


def _explain_wait(instance: Instance, status) -> None:
    """Show why a start waits (the Slurm backend: "waiting for 2 free MLU370 cards") on the instance's page."""
    detail = (status.message or "")[:255]
    if detail and detail != instance.status_detail:
        Instance.objects.filter(pk=instance.pk, status=instance.status).update(status_detail=detail)
        instance.status_detail = detail


def _become_running(instance: Instance, status) -> None:
    now = timezone.now()
    q = instance_quote(instance)
    data = {"payable_per_hour": str(q.payable_per_hour), "plan": q.plan_slug}
    with transaction.atomic():
        transition(instance, Status.RUNNING, reason=Reason.HEALTHY, at=now, data=data, running_since=now,
                   price_per_hour=q.payable_per_hour, access=status.access)  # fmt: skip
        if instance.plan.is_per_minute:
            billing.open_usage(instance, q, now)
        elif instance.term_ends_at is None or instance.term_ends_at <= now:
            _renew_term(instance, q, now)


def _renew_term(instance: Instance, q: Quote, now) -> None:
    ends = now + timedelta(minutes=instance.plan.period_minutes)
    billing.charge_upfront(instance, q, term_key=now.strftime("%Y%m%dT%H%M%S"))
    Instance.objects.filter(pk=instance.pk).update(term_ends_at=ends)
    instance.term_ends_at = ends
    note(instance, Reason.TERM_RENEWED, detail=str(q.payable_total), at=now,
         data={"payable_total": str(q.payable_total), "ends": ends.isoformat()})  # fmt: skip


def _step_running(instance: Instance, status) -> float | None:
    status = status or _backend(instance).status(instance)
    if status.phase == Phase.PREEMPTED:
        preempt(instance, at=status.since)
        return _step_preempted(instance, status)
    if status.phase in (Phase.FAILED, Phase.ABSENT, Phase.STOPPED, Phase.RELEASED):
        # The machine died under a running instance: billing stops when it died (when known).
        at = status.since or timezone.now()
        _fail(instance, Reason.NODE_LOST, status.message or status.phase.value, at=min(at, timezone.now()))
    return None


def _step_stopping(instance: Instance, status) -> float | None:
    backend = _backend(instance)
    if instance.backend_job_id:
        backend.stop(instance, grace_seconds=conf.stop_grace_seconds())
    status = backend.status(instance)
    if status.phase in (Phase.STOPPING, Phase.BOOTING, Phase.RUNNING):
        return max(status.ready_in or 1.0, 0.2)
    now = timezone.now()
    with transaction.atomic():
        free(instance)
        transition(instance, Status.STOPPED, reason=Reason.STOPPED, at=now, stopped_at=now,
                   release_at=now + RELEASE_AFTER, access={})  # fmt: skip
    return None


def _step_preempted(instance: Instance, status) -> float | None:
    """Until the machine is down: wait out the notice window, or (a machine still up without one, e.g. cards
    reclaimed on a backend whose preemption is a stop) send the signal and stop it after the window. Then the
    cards are free (already moved to the on-demand instance when they were reclaimed)."""
    status = status or _backend(instance).status(instance)
    if status.phase == Phase.PREEMPTED and status.ready_in:
        return status.ready_in  # the notice window is still running
    if status.phase in (Phase.RUNNING, Phase.BOOTING, Phase.STOPPING):
        _backend(instance).preempt(instance, notice_seconds=conf.spot_notice_seconds())
        return max(status.ready_in or conf.spot_notice_seconds(), 0.2)
    free(instance)
    return None


def _step_releasing(instance: Instance, status) -> float | None:
    _backend(instance).release(instance)
    with transaction.atomic():
        free(instance)
        transition(instance, Status.RELEASED, reason=Reason.RELEASED, access={})
        attachments.on_released(instance)  # data disks are detached and kept, never deleted
    return None


_STEPS = {
    Status.CREATING: _step_creating,
    Status.STARTING: _step_starting,
    Status.RUNNING: _step_running,
    Status.STOPPING: _step_stopping,
    Status.PREEMPTED: _step_preempted,
    Status.RELEASING: _step_releasing,
}


def reconcile() -> int:
    """Compare wanted and actual state of every live instance and repair drift: a lost task, a worker killed
    mid-provision, a backend that says otherwise. Safe to run twice at once (every step is compare-and-set).
    Returns how many instances it looked at."""
    reclaim_watch = timedelta(seconds=conf.spot_notice_seconds() + 600)
    live = (
        Instance.objects.with_related()
        .select_related("owner")
        .filter(
            Q(status__in=[*LIVE])
            | Q(status=Status.PREEMPTED, reserved_cards__gt=0)
            # reclaimed: the cards moved at once, the machine goes down after the notice window
            | Q(status=Status.PREEMPTED, stopped_at__gte=timezone.now() - reclaim_watch)
        )
    )
    by_backend: dict[str, list[Instance]] = {}
    for instance in live:
        by_backend.setdefault(instance.backend_name, []).append(instance)
    for name, instances in by_backend.items():
        try:
            statuses = get_backend(name).status_many(instances)
        except TransientBackendError:
            continue  # the backend is unreachable this beat (e.g. its controller restarts): change nothing
        for instance in instances:
            step = _STEPS[instance.status]
            try:
                step(instance, statuses.get(instance.public_id))
            except Conflict:
                continue
            except TransientBackendError:
                continue
    return sum(len(v) for v in by_backend.values())


# Housekeeping: auto-shutdown, prepaid terms, the release countdown -------------------------------------------


def housekeeping() -> dict:
    """The minute beat: auto-shutdown (at a time or when idle), prepaid terms that end, release reminders and the
    automatic release of instances stopped for ``STOPPED_RELEASE_DAYS``. Each action is a guarded transition, so
    two overlapping beats act once."""
    return {
        "auto_shutdown": _auto_shutdown(),
        "terms": _end_terms(),
        "reminders": _remind_release(),
        "released": _auto_release(),
    }


def _quietly(action, *args, **kwargs) -> bool:
    try:
        action(*args, **kwargs)
    except Conflict:
        return False
    return True


def _auto_shutdown() -> int:
    now = timezone.now()
    done = 0
    running = Instance.objects.with_related().select_related("owner").filter(status=Status.RUNNING)
    for instance in running.filter(auto_shutdown_at__lte=now):
        with transaction.atomic():  # the time is used up: a restart afterwards runs until stopped
            if _quietly(stop, instance, reason=Reason.AUTO_SHUTDOWN_TIME):
                Instance.objects.filter(pk=instance.pk).update(auto_shutdown_at=None)
                instance.auto_shutdown_at = None
                done += 1
    for instance in running.filter(idle_shutdown_minutes__isnull=False, running_since__isnull=False):
        minutes = instance.idle_shutdown_minutes
        if instance.running_since > now - timedelta(minutes=minutes):
            continue
        points = _backend(instance).metrics(instance, minutes=minutes)
        if len(points) >= minutes and all(p.card_utilisation < instance.idle_threshold_percent for p in points):
            detail = _("below %(pct)s%% for %(minutes)s minutes") % {
                "pct": instance.idle_threshold_percent, "minutes": minutes}  # fmt: skip
            done += _quietly(stop, instance, reason=Reason.AUTO_SHUTDOWN_IDLE, detail=detail)
    return done


def _end_terms() -> int:
    now = timezone.now()
    done = 0
    due = (
        Instance.objects.with_related()
        .select_related("owner")
        .filter(status=Status.RUNNING, plan__period_minutes__gt=1, term_ends_at__lte=now)
    )
    for instance in due:
        if instance.term_end_action == TermEnd.STOP:
            done += _quietly(stop, instance, reason=Reason.TERM_ENDED)
        else:
            done += _continue_payg(instance)
    return done


def _continue_payg(instance: Instance) -> int:
    from billing.models import Plan

    payg = Plan.objects.filter(slug="payg").first()
    ended = instance.term_ends_at
    with transaction.atomic():
        # Compare-and-set on the term: two beats switch the plan (and open metering) once.
        if not Instance.objects.filter(pk=instance.pk, term_ends_at=ended, plan=instance.plan).update(
            plan=payg, term_ends_at=None
        ):
            return 0
        instance.plan, instance.term_ends_at = payg, None
        q = instance_quote(instance)
        Instance.objects.filter(pk=instance.pk).update(price_per_hour=q.payable_per_hour)
        billing.open_usage(instance, q, ended)
        note(instance, Reason.TERM_CONTINUED, at=ended, data={"payable_per_hour": str(q.payable_per_hour)})
    return 1


def _remind_release() -> int:
    """A reminder 3 days and 1 day before a stopped instance is released: an event on its timeline, and a
    notification on the owner's dashboard and by e-mail. A beat that missed the first sends only the latest."""
    now = timezone.now()
    sent = 0
    due_soon = Instance.objects.filter(
        status__in=[*RESTING],
        release_at__lte=now + timedelta(days=max(RELEASE_REMINDER_DAYS)),
        release_reminders_sent__lt=len(RELEASE_REMINDER_DAYS),
    ).select_related("owner")
    for instance in due_soon:
        left = instance.release_at - now
        due = sum(1 for days in RELEASE_REMINDER_DAYS if left <= timedelta(days=days))
        # Compare-and-set on the counter: one reminder per threshold, however many beats run.
        if due > instance.release_reminders_sent and Instance.objects.filter(
            pk=instance.pk, status__in=[*RESTING], release_at=instance.release_at, release_reminders_sent__lt=due
        ).update(release_reminders_sent=due):
            with transaction.atomic():
                note(instance, Reason.RELEASE_REMINDER, detail=instance.release_at.isoformat())
                date = timezone.localtime(instance.release_at).strftime("%Y-%m-%d %H:%M")
                billing.notify(instance, "release_reminder", date=date)
            sent += 1
    return sent


def _auto_release() -> int:
    due = Instance.objects.with_related().filter(status__in=[*RESTING], release_at__lte=timezone.now())
    return sum(_quietly(release, instance, reason=Reason.AUTO_RELEASE) for instance in due)


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


def preview(user, request: LaunchRequest) -> Quote:
    """The price the wizard shows for ``request`` (the chip the launch would pick first), or ServiceError."""
    candidates = _candidates(request, user, load_price_book(user=user))
    get_image(request.image, candidates[0].chip.backend if candidates[0].chip else None, user)
    return candidates[0].quote
