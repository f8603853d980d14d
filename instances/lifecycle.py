"""Driving instances: the user operations (start, stop, release), spot preemption and arrears stops, each a
guarded move of the state machine in one transaction with a task enqueued on commit; and ``advance``, the
idempotent step that tasks and the reconcile beat take towards what the owner wants, asking the backend."""

import logging
import uuid
from contextlib import ExitStack, contextmanager
from datetime import datetime, timedelta

from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _
from kombu.exceptions import OperationalError

from billing.quote import Quote, quote
from catalog.models import Chip, InstanceSpec, Node, Zone
from core.errors import Conflict, NotFound, PaymentRequired, ServiceError
from teams.access import reaches, refuse_if_seen

from . import attachments, charges, conf, limits, tasks
from .backends import BackendError, Phase, TransientBackendError, get_backend
from .capacity import Demand, demand_for, free, hold, node_shortage, out_of_capacity, reserve, reserve_compute
from .choices import (
    SPEC_CARD_COUNTS,
    Reason,
    Status,
    Wanted,
)
from .models import Instance
from .statemachine import check_move, note, transition

logger = logging.getLogger(__name__)


def get_instance(user, public_id, action: str = "view") -> Instance:
    """The caller's instance; someone else's and a missing one are the same 404."""
    try:
        key = uuid.UUID(str(public_id))
    except ValueError:
        key = None
    # Read by its key, then checked against the ownership rule: one's own instance needs no subquery (compiling
    # one cost as much as the rest of the lookup), a team's one more query.
    try:
        # With its daily stop and start, which its page shows: a lookup by key is planned quickly with one join more.
        instance = Instance.objects.with_related().select_related("daily_power").get(public_id=key) if key else None
    except Instance.DoesNotExist:
        instance = None
    if instance is not None and not reaches(user, instance.owner_id, action):
        instance = None
    if instance is None:
        if key:  # a team member whose role may see the instance but not act on it is told so, not sent away
            refuse_if_seen(user, Instance.objects.all(), action, public_id=key)
        raise NotFound(_("No such instance."))
    return instance


def _enqueue(task_name: str, instance: Instance, wanted: str) -> None:
    task = getattr(tasks, task_name)

    def send() -> None:
        try:
            task.delay(instance.pk, wanted)
        except (OperationalError, OSError):
            # The broker is down. The instance is committed with what it wants, so reconcile (every 15 s) finishes
            # the work once the broker is back; the user's request must not fail for it.
            logger.warning("broker unavailable: %s for instance %s left to reconcile", task_name, instance.pk)

    transaction.on_commit(send)


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


def _nodes_for(chip: Chip, zone: Zone):
    return Node.objects.schedulable().filter(chip=chip, zone=zone)


def instance_quote(instance: Instance, book=None, *, spec: InstanceSpec | None = None) -> Quote:
    """What running ``instance`` (or it with ``spec``) costs now: one hour, or one prepaid term. The price is
    frozen into the usage session when it starts running."""
    spec = spec or instance.spec
    return quote(
        spec=spec, zone=instance.zone, plan=instance.plan.slug, spot=instance.spot, user=instance.owner, book=book
    )


def stop(instance: Instance, *, reason: str = Reason.STOP_REQUESTED, detail: str = "") -> Instance:
    """Ask ``instance`` to stop: billing stops now; the backend sends the checkpoint signal and stops it after the
    grace period (in a task)."""
    now = timezone.now()
    was_running = instance.status == Status.RUNNING
    with transaction.atomic():
        transition(
            instance,
            Status.STOPPING,
            reason=reason,
            detail=detail,
            at=now,
            wanted=Wanted.STOPPED,
            stop_requested_at=now,
        )
        if was_running:
            charges.close_usage(instance.public_id, ended_at=now)
        _enqueue("stop", instance, Wanted.STOPPED)
    return instance


def start(instance: Instance, *, no_card: bool = False, by=None) -> Instance:
    """Start a stopped (or preempted, or failed) instance: on its node if it has room, else on another node of
    the zone (its disks follow), else — when asked — in no-card mode. Relaunching a preempted spot instance is
    this same operation. ``by``: who asks; a member who starts a team's instance runs it from now on, so its
    charges count against their monthly budget (checked here), as if they had launched it."""
    check_move(instance, Status.STARTING)
    runner = by.pk if by is not None and by.pk != instance.owner_id else instance.launched_by_id
    to_no_card = no_card and instance.chip_id is not None
    spec = _spec_for(None, 0) if to_no_card else instance.spec
    q = instance_quote(instance, spec=spec)
    in_paid_term = instance.term_ends_at is not None and instance.term_ends_at > timezone.now()
    with transaction.atomic():
        if not in_paid_term:
            charges.check_launch_funds(instance.owner, q, by=runner, exclude=instance)
        limits.check_launch(instance.owner, cpu_only=to_no_card or instance.chip_id is None, exclude=instance)
        # A spot instance relaunched in its notice window still holds its old cards: give them back first (its old
        # machine is being stopped anyway), so the reservation below is the only one it holds.
        free(instance)
        if to_no_card:
            _switch_to_no_card(instance, spec)
        detail = ""
        if instance.chip_id is not None:
            demand = demand_for(instance.backend_name, instance.spec)
            node = _reserve_for_restart(instance, demand)
            if node.pk != instance.node_id:
                note(
                    instance,
                    Reason.MOVED,
                    detail=_("from %(old)s to %(new)s")
                    % {"old": instance.node.name if instance.node else "—", "new": node.name},
                )
            hold(instance, node, instance.cards, demand)
            detail = node.name
        else:
            nodes = Node.objects.schedulable().filter(zone=instance.zone, backend_name=instance.backend_name)
            reserve_compute(instance, instance.spec, nodes)
        transition(
            instance,
            Status.STARTING,
            reason=Reason.START_REQUESTED,
            detail=detail,
            wanted=Wanted.RUNNING,
            stop_requested_at=None,
            stopped_at=None,
            release_at=None,
            release_reminders_sent=0,
            price_per_hour=q.payable_per_hour,
            launched_by_id=runner,
            # The previous run's job is not this run's: what its agent says (or is made to say) never counts for it.
            backend_job_id="",
        )
        _enqueue("start", instance, Wanted.RUNNING)
    return instance


def _reserve_for_restart(instance: Instance, demand: Demand) -> Node:
    home = Node.objects.filter(pk=instance.node_id) if instance.node_id else Node.objects.none()
    others = _nodes_for(instance.chip, instance.zone).exclude(pk=instance.node_id)
    node = reserve(home, instance.cards, demand) or reserve(others, instance.cards, demand)
    if node is None:
        shortage = node_shortage(_nodes_for(instance.chip, instance.zone), instance.cards, demand)
        if shortage is not None:
            raise shortage
        what = _("%(cards)s× %(chip)s in %(zone)s") % {
            "cards": instance.cards,
            "chip": instance.chip.label,
            "zone": instance.zone.label,
        }
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
            charges.close_usage(instance.public_id, ended_at=now)
        _enqueue("release", instance, Wanted.RELEASED)
    return instance


def _not_before_running(instance: Instance, at):
    """When a running instance stopped, as the instance's own record says it: a backend's time (Slurm keeps whole
    seconds) can fall before the moment the console saw it running and billing began; it stopped no earlier than
    that, so the stop time and the end of its usage session are the same instant."""
    since = instance.running_since if instance.status == Status.RUNNING else None
    return max(at, since) if since is not None else at


def preempt(instance: Instance, *, at=None, detail: str = "") -> Instance:
    """Reclaim a running spot instance: the checkpoint signal with the notice window, billing stops at the
    preemption minute, disks are kept; the owner can relaunch it with one click."""
    at = _not_before_running(instance, at or timezone.now())
    with transaction.atomic():
        transition(
            instance,
            Status.PREEMPTED,
            reason=Reason.PREEMPTED,
            detail=detail,
            at=at,
            wanted=Wanted.STOPPED,
            stop_requested_at=at,
            stopped_at=at,
            release_at=at + conf.release_after(),
        )
        charges.close_usage(instance.public_id, ended_at=at)
        charges.notify(instance, "spot_preempted", notice=int(conf.spot_notice_seconds()))
        _enqueue("stop", instance, Wanted.STOPPED)
    return instance


def stop_for_arrears(user_id: int, reason: str, *, member_id: int | None = None) -> int:
    """Billing's arrears handler (registered in ``InstancesConfig.ready``): stop the user's pay-as-you-go
    instances with the checkpoint signal, or with ``member_id`` only those that member launched on the user's (a
    team's) wallet. ``reason`` names the cause (zero balance, the monthly spending cap, the member's budget).
    Returns how many."""
    reason_text = (reason or "").lower()
    if member_id is not None or "budget" in reason_text:
        code = Reason.MEMBER_BUDGET
    else:
        code = Reason.SPENDING_CAP if "cap" in reason_text else Reason.ARREARS
    stopped = 0
    instances = Instance.objects.with_related().filter(
        owner_id=user_id, status__in=[Status.RUNNING, Status.STARTING], plan__period_minutes=1
    )
    if member_id is not None:
        instances = instances.filter(launched_by_id=member_id)
    for instance in instances:
        try:
            stop(instance, reason=code, detail="" if member_id is not None else reason or "")
        except Conflict:
            continue  # it moved meanwhile (a concurrent stop): nothing to do
        stopped += 1
    return stopped


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


def _fail(instance: Instance, reason: str, detail: str = "", at=None, *, stop: bool = True) -> None:
    """A permanent failure: free the cards; nothing is charged for a launch that never became healthy. ``stop``:
    ask the backend to end the machine (after the transaction; the caller does it otherwise)."""
    was_running = instance.status == Status.RUNNING
    at = _not_before_running(instance, at or timezone.now())
    with transaction.atomic():
        transition(
            instance,
            Status.FAILED,
            reason=reason,
            detail=detail,
            at=at,
            wanted=Wanted.STOPPED,
            stopped_at=at,
            release_at=at + conf.release_after(),
        )
        if was_running:
            charges.close_usage(instance.public_id, ended_at=at)
        free(instance)
    if stop:
        _stop_machine(instance)


def _stop_machine(instance: Instance) -> None:
    """Ask the backend to end a failed machine at once; one already gone needs nothing."""
    try:
        _backend(instance).stop(instance, grace_seconds=0)
    except BackendError:
        pass  # the machine is gone already


def _step_creating(instance: Instance, status) -> float | None:
    transition(instance, Status.STARTING, reason=Reason.SUBMITTED, detail=instance.node.name if instance.node else "")
    return _step_starting(instance, None)


def _step_starting(instance: Instance, status) -> float | None:
    status = status or _backend(instance).status(instance)
    _record_job(instance, status)
    if status.phase == Phase.RUNNING:
        _become_running(instance, status)
        return None
    if status.phase == Phase.PREEMPTED and status.ran_from is not None:
        _preempted_between_looks(instance, status)
        return None
    if status.ran_from is not None:
        _ran_between_looks(instance, status)
        return None
    if status.phase == Phase.FAILED:
        _fail(instance, _failure_reason(status), status.message)
        return None
    # Never submitted, or a machine left over from the previous run (still stopping, on a backend whose machine is
    # the instance's): submit. A job this run submitted (``start`` clears the previous run's id) that is ending — a
    # spot job Slurm requeues passes through COMPLETING — is looked at again when it has ended, never submitted twice.
    this_runs_job_ends = status.phase == Phase.STOPPING and bool(instance.backend_job_id)
    if status.phase != Phase.BOOTING and not this_runs_job_ends:
        if not _submit(instance):
            return None
        status = _backend(instance).status(instance)
        if status.phase == Phase.RUNNING:
            _become_running(instance, status)
            return None
    _explain_wait(instance, status)
    started = instance.events.filter(new=Status.STARTING).order_by("-at").values_list("at", flat=True).first()
    waited = (timezone.now() - started).total_seconds() if started else 0
    if instance.kind == Instance.Kind.ENDPOINT and waited > conf.endpoint_health_timeout_seconds():
        seconds = int(conf.endpoint_health_timeout_seconds())
        detail = _("the model server did not answer its health check within %(seconds)s seconds") % {"seconds": seconds}
        _fail(instance, Reason.NEVER_HEALTHY, detail)
        return None
    if waited > conf.provision_timeout_seconds():
        minutes = int(conf.provision_timeout_seconds() // 60)
        _fail(instance, Reason.NEVER_HEALTHY, _("not healthy after %(minutes)s minutes") % {"minutes": minutes})
        return None
    return max(status.ready_in or 2.0, 0.2)


def _ran_between_looks(instance: Instance, status) -> None:
    """A machine that ran and ended between two looks (a short job on a cluster): running from when it began (not
    before this start was asked) to when it ended, both in one transaction, so its started minutes are billed and
    nothing sees it running in between; then ended as a running machine that ends."""
    began = _began(instance, status)
    now = timezone.now()
    with transaction.atomic():
        _become_running(instance, status, at=began)
        if instance.status != Status.RUNNING:
            return  # its prepaid term could not be paid: failed already
        at = max(min(status.since or now, now), began)
        if instance.time_limit_minutes:  # a cluster notices a time limit on its own periodic check
            at = min(at, began + timedelta(minutes=instance.time_limit_minutes))
        _fail(instance, _failure_reason(status), status.message or status.phase.value, at=at, stop=False)
    _stop_machine(instance)


def _preempted_between_looks(instance: Instance, status) -> None:
    """A spot machine that began to run and had its cards reclaimed between two looks: running from when it began,
    then preempted when the cluster took the cards back, both in one transaction, so its started minutes are billed
    as a reclaimed machine's."""
    began = _began(instance, status)
    with transaction.atomic():
        _become_running(instance, status, at=began)
        if instance.status != Status.RUNNING:
            return  # its prepaid term could not be paid: failed already
        now = timezone.now()
        # Slurm keeps whole seconds: a reclaim in the second the machine began came after it, within that second.
        reclaimed = min(status.since or now, now)
        at = reclaimed if reclaimed > began else min(reclaimed + timedelta(seconds=1), now)
        preempt(instance, at=max(at, began))
    _step_preempted(instance, status)


def _began(instance: Instance, status) -> datetime:
    """When a machine that ran between two looks began: where the backend says, never before this start was asked
    for, never in the future."""
    started = instance.events.filter(new=Status.STARTING).order_by("-at").values_list("at", flat=True).first()
    return min(max(status.ran_from, started or status.ran_from), timezone.now())


def _explain_wait(instance: Instance, status) -> None:
    """Show why a start waits (the Slurm backend: "waiting for 2 free MLU370 cards") on the instance's page."""
    detail = (status.message or "")[:255]
    if detail and detail != instance.status_detail:
        Instance.objects.filter(pk=instance.pk, status=instance.status).update(status_detail=detail)
        instance.status_detail = detail


def _become_running(instance: Instance, status, *, at=None) -> None:
    now = at or timezone.now()
    q = instance_quote(instance)
    data = {"payable_per_hour": str(q.payable_per_hour), "plan": q.plan_slug}
    try:
        with transaction.atomic():
            transition(
                instance,
                Status.RUNNING,
                reason=Reason.HEALTHY,
                at=now,
                data=data,
                running_since=now,
                price_per_hour=q.payable_per_hour,
                access=status.access,
            )
            if instance.plan.is_per_minute:
                charges.open_usage(instance, q, now)
            elif instance.term_ends_at is None or instance.term_ends_at <= now:
                _renew_term(instance, q, now)
    except PaymentRequired as exc:
        # The prepaid term cannot be paid now (the balance went to something else since the launch): the move to
        # running rolled back with the charge, and the machine is stopped rather than left up unpaid.
        instance.refresh_from_db()
        _fail(instance, Reason.ARREARS, detail=exc.message)


def _renew_term(instance: Instance, q: Quote, now) -> None:
    ends = now + timedelta(minutes=instance.plan.period_minutes)
    charges.charge_upfront(instance, q, term_key=now.strftime("%Y%m%dT%H%M%S"))
    Instance.objects.filter(pk=instance.pk).update(term_ends_at=ends)
    instance.term_ends_at = ends
    note(
        instance,
        Reason.TERM_RENEWED,
        detail=str(q.payable_total),
        at=now,
        data={"payable_total": str(q.payable_total), "ends": ends.isoformat()},
    )


def _step_running(instance: Instance, status) -> float | None:
    status = status or _backend(instance).status(instance)
    _record_job(instance, status)
    if status.phase == Phase.PREEMPTED:
        preempt(instance, at=status.since)
        return _step_preempted(instance, status)
    if status.phase in (Phase.FAILED, Phase.ABSENT, Phase.STOPPED, Phase.RELEASED):
        # The machine died under a running instance: billing stops when it died (when known).
        at = status.since or timezone.now()
        _fail(instance, _failure_reason(status), status.message or status.phase.value, at=min(at, timezone.now()))
    return None


def _record_job(instance: Instance, status) -> None:
    """The job a machine runs on, where the console never recorded its id (a worker lost between submitting and
    recording it): recorded now, so that it is found by its id from then on. Only a running one: a starting
    machine's job of its name may still be the previous run's, ending."""
    if status is not None and status.phase == Phase.RUNNING and status.job_id and not instance.backend_job_id:
        Instance.objects.filter(pk=instance.pk, backend_job_id="").update(backend_job_id=status.job_id)
        instance.backend_job_id = status.job_id


@contextmanager
def _one_listing(backends):
    """The beat's sweep and statuses read one listing of what runs on each backend (where it keeps one)."""
    with ExitStack() as stack:
        for name in sorted(backends):
            try:
                stack.enter_context(get_backend(name).one_listing())
            except BackendError:  # no such backend, or nothing to list: the sweep and statuses say so
                continue
        yield


def _statuses(name: str, instances) -> dict | None:
    """The backend's statuses of its live instances; None when it cannot say this beat."""
    try:
        return get_backend(name).status_many(instances)
    except TransientBackendError:
        return None  # the backend is unreachable this beat (e.g. its controller restarts): change nothing
    except BackendError as exc:  # it refuses the console (credentials): the other backends are looked at
        logger.warning("reconcile on backend %s: %s", name, exc)
        return None
    except Exception:  # a bug in one backend never keeps the others' instances from their steps
        logger.exception("reconcile on backend %s", name)
        return None


def _sweep(backends) -> None:
    """Each backend ends what runs on it as the console's tenants and no instance claims."""
    for name in sorted(backends):
        try:
            get_backend(name).sweep()
        except (TransientBackendError, BackendError) as exc:  # a cluster that does not answer: the next beat tries
            logger.warning("sweeping backend %s: %s", name, exc)


def _failure_reason(status) -> str:
    return Reason.CHANGED_OUTSIDE if status.changed_outside else Reason.NODE_LOST


def _step_stopping(instance: Instance, status) -> float | None:
    backend = _backend(instance)
    # Also without a recorded job: one may have been submitted and its id not recorded (a worker lost in between).
    backend.stop(instance, grace_seconds=conf.stop_grace_seconds())
    status = backend.status(instance)
    if status.phase in (Phase.STOPPING, Phase.BOOTING, Phase.RUNNING):
        return max(status.ready_in or 1.0, 0.2)
    now = timezone.now()
    with transaction.atomic():
        free(instance)
        transition(
            instance,
            Status.STOPPED,
            reason=Reason.STOPPED,
            at=now,
            stopped_at=now,
            release_at=now + conf.release_after(),
            access={},
        )
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
    live = Instance.objects.with_related().select_related("owner").reconciled()
    by_backend: dict[str, list[Instance]] = {}
    for instance in live:
        by_backend.setdefault(instance.backend_name, []).append(instance)
    names = set(by_backend) | set(Node.objects.values_list("backend_name", flat=True).distinct())
    with _one_listing(names):
        _sweep(names)
        statuses_of = {name: _statuses(name, instances) for name, instances in by_backend.items()}
    for name, instances in by_backend.items():
        statuses = statuses_of[name]
        if statuses is None:
            continue
        for instance in instances:
            step = _STEPS[instance.status]
            try:
                step(instance, statuses.get(instance.public_id))
            except (Conflict, TransientBackendError):
                continue
            except ServiceError as exc:  # one instance's trouble never stops the others' reconcile
                logger.warning("reconcile %s: %s", instance.public_id, exc.message)
                continue
    return sum(len(v) for v in by_backend.values())
