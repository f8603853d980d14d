"""Running jobs: placing queued jobs on machines, fairly across accounts, and watching each machine until its
command ends or its timeout hits — then the machine is released at once, so billing stops at that minute.

Both steps are safe when two beats overlap: placement claims a queued job with ``SELECT … FOR UPDATE SKIP LOCKED``
(on SQLite, which has no row locks, the compare-and-set of the state machine does the same), and every change of
state is a compare-and-set.
"""

import logging
from datetime import datetime, timedelta

from django.db import transaction
from django.utils import timezone, translation
from django.utils.translation import gettext as _

from billing import arrears
from billing.choices import NotificationKind
from core.errors import Conflict, PaymentRequired, ServiceError
from instances import charges, launching, lifecycle, logs, queue, waiting
from instances.capacity import CapacityError
from instances.choices import Status
from instances.queue import JOB, LAUNCH, LEFT, NO_ROOM, PLACED, Entry

from . import clusters, outputs
from .choices import ACTIVE, State
from .exits import workload_exit
from .models import Job
from .statemachine import note, transition

logger = logging.getLogger(__name__)

KEPT_LOG_LINES = 1000

# The instance states in which a job's machine has ended under it (not by the job's own release).
MACHINE_GONE = frozenset({Status.STOPPING, Status.STOPPED, Status.PREEMPTED, Status.FAILED, Status.RELEASED})


def queued_entries() -> list[Entry]:
    """The queued jobs as entries of the console's one queue (``instances.queue``), which orders them fairly beside
    the launches waiting for a card."""
    rows = (
        Job.objects.filter(state=State.QUEUED)
        .order_by("queued_at", "pk")
        .values_list("pk", "owner_id", "submitted_by_id", "queued_at", "chip_id", "family", "spot", "cards")
    )
    return [
        Entry(JOB, pk, owner, person, at, (chip, family, spot), cards)
        for pk, owner, person, at, chip, family, spot, cards in rows
    ]


def machine_ends() -> dict[int, datetime]:
    """instance id → the latest time the machine of each job with one ends: its deadline (a starting job's counts
    from now)."""
    now = timezone.now()
    rows = Job.objects.filter(state__in=[*ACTIVE], instance__isnull=False).values_list(
        "instance_id", "started_at", "timeout_seconds"
    )
    return {pk: (started or now) + timedelta(seconds=timeout) for pk, started, timeout in rows}


def queue_order() -> list[int]:
    """The queued jobs' ids in the order placement tries them."""
    return [entry.pk for entry in queue.order() if entry.kind == JOB]


def place_queued() -> int:
    """Try to start everything waiting for a card — queued jobs and launches that wait — in the queue's fair order;
    what finds no card stays queued. Returns how many started. Once a kind of card (chip, family, spot) had no room
    for n cards in this pass, the entries after it that want n or more of that kind wait for the next pass without
    asking: a long queue costs a pass one try per kind, not one per entry."""
    started = 0
    no_room: dict[tuple, int] = {}  # what an entry waits for → the fewest cards of it found not free in this pass
    # Jobs not tried whose balance check passed, by who pays and asks and what card: their alike jobs (a job's price
    # is its card's, whatever its image) need no check in this pass; one that leaves takes no money, so it stands.
    paid: set[tuple] = set()
    for entry in queue.order():
        if entry.cards >= no_room.get(entry.wants, entry.cards + 1):
            # Not tried, but still told when the balance can no longer pay: it does not wait for nothing.
            alike = (entry.owner_id, entry.person_id, entry.wants, entry.cards)
            if entry.kind == LAUNCH:
                waiting.leave_if_unaffordable(entry.pk)
            elif alike not in paid and leave_if_unaffordable(entry.pk) == PAYS:
                paid.add(alike)
            continue
        try:
            outcome = place(entry.pk) if entry.kind == JOB else waiting.place(entry.pk)
        except Conflict:
            continue  # another beat moved it first
        if outcome == PLACED:
            started += 1
        elif outcome == NO_ROOM:
            no_room[entry.wants] = min(entry.cards, no_room.get(entry.wants, entry.cards))
    return started


def _launch_request(job: Job, cluster: bool) -> launching.LaunchRequest:
    where = {"no_card": True} if job.family == "cpu" else {"chip": job.chip.slug} if job.chip_id else {}
    return launching.LaunchRequest(
        name=job.name,
        image=job.image,
        backend="" if where else job.family,
        cards=job.cards,
        spot=job.spot,
        env={**job.env, **outputs.variables(job, cluster=cluster)},
        start_command=outputs.start_command(job, cluster=cluster),
        time_limit_minutes=clusters.time_limit_minutes(job),
        wait_in_cluster=True,  # where a cluster's scheduler runs the nodes, it is the queue
        **where,
    )


def place(pk: int) -> str:
    """Launch the machine of the queued job ``pk`` if a card is free (where a cluster queues machines: at once,
    to wait there): PLACED; NO_ROOM when no card of its kind is free anywhere; LEFT otherwise (it waits, left the
    queue, or another beat holds it)."""
    with transaction.atomic():
        job = Job.objects.select_for_update(skip_locked=True).filter(pk=pk, state=State.QUEUED).first()
        if job is None:
            return LEFT
        with translation.override(waiting.language_of(job.submitted_by_id or job.owner_id)):
            return _place(job)


# What the balance check of a queued job not tried says: it left, it can pay, or nothing is known (another beat
# holds the job, or something else than the balance is wrong: for its turn to say).
LEFT_UNPAID, PAYS, UNKNOWN = "left", "pays", "unknown"


def leave_if_unaffordable(pk: int) -> str:
    """For a queued job that was not tried in a pass (no card of its kind was free): fail it, saying so, when the
    balance can no longer pay its machine's first hour, as its turn would. Returns LEFT_UNPAID, PAYS or UNKNOWN."""
    with transaction.atomic():
        job = Job.objects.select_for_update(skip_locked=True).filter(pk=pk, state=State.QUEUED).first()
        if job is None:
            return UNKNOWN
        with translation.override(waiting.language_of(job.submitted_by_id or job.owner_id)):
            try:
                request = _launch_request(job, outputs.on_cluster(job))
                quote = launching.preview(job.owner, request, by=job.submitted_by)
                charges.check_launch_funds(job.owner, quote, by=job.submitted_by_id)
            except PaymentRequired as exc:
                _leave_unpaid(job, exc)
                return LEFT_UNPAID
            except ServiceError:
                return UNKNOWN
    return PAYS


def _leave_unpaid(job: Job, exc: PaymentRequired) -> None:
    transition(job, State.FAILED, detail=_("Left the queue: %(why)s") % {"why": exc.message}, ended_at=timezone.now())


def _place(job: Job) -> str:
    try:
        cluster = outputs.on_cluster(job)
        with transaction.atomic():
            instance = launching.launch(job.owner, _launch_request(job, cluster), by=job.submitted_by)
            # Only once a card was found; a folder that cannot be made undoes the launch and fails the job.
            outputs.make_folder(job, cluster=cluster)
    except CapacityError as exc:
        note(job, _("Waiting for a card: %(why)s") % {"why": exc.message})
        # Cards of its kind free somewhere this account may not launch: another account's job may still fit.
        free_elsewhere = any(
            waiting.of_its_kind(free.chip, job.chip_id, job.family) and free.largest >= job.cards
            for free in exc.alternatives
        )
        return LEFT if free_elsewhere else NO_ROOM
    except PaymentRequired as exc:
        _leave_unpaid(job, exc)
        return LEFT
    except ServiceError as exc:
        transition(job, State.FAILED, detail=exc.message, ended_at=timezone.now())
        return LEFT
    transition(
        job,
        State.STARTING,
        detail=instance.name,
        instance=instance,
        attempts=job.attempts + 1,
        exit_code=None,
    )
    return PLACED


def watch_active() -> int:
    """Look at every job with a machine: started, ended, or past its timeout. Returns how many it looked at."""
    jobs = list(Job.objects.filter(state__in=[*ACTIVE]).select_related("instance", "owner", "submitted_by"))
    clusters.read_queues(jobs)
    for job in jobs:
        try:
            with translation.override(waiting.reading_language((job.submitted_by or job.owner).language)):
                watch(job)
        except Conflict:
            continue
        except ServiceError as exc:  # one job's trouble never stops the others'
            logger.warning("watching job %s: %s", job.public_id, exc.message)
    return len(jobs)


def watch(job: Job) -> None:
    instance = job.instance
    if instance is None:
        return
    # A reclaimed spot machine sends its job back to the queue, unless its command had ended before the reclaim:
    # then the job ended with it (a finished command is never run again).
    if instance.status == Status.PREEMPTED and job.spot and not _ended_before_reclaim(instance):
        _requeue(job)
        return
    if job.state == State.STARTING:
        _watch_starting(job, instance)
        return
    if clusters.timed_out(job):
        _time_out(job)
        return
    ended = workload_exit(instance)
    if ended is not None and clusters.undecided(job, ended):
        return
    # Billing ends when the job ended as far as anyone can tell, and never past its timeout: a command that ended
    # after it, or a beat that noticed late, costs the user nothing more than the most the job showed.
    last = min(timezone.now(), deadline(job))
    if ended is not None:
        _finish(job, ended.code, at=min(ended.at or last, last))
    elif instance.status in MACHINE_GONE:
        _machine_gone(job, at=last)
    elif timezone.now() >= deadline(job):
        _time_out(job)


def _ended_before_reclaim(instance) -> bool:
    """Whether the machine's command had ended before its cards were reclaimed (an end the reclaim's own signal
    caused comes after it)."""
    ended = workload_exit(instance)
    if ended is None or ended.at is None or instance.stopped_at is None:
        return False
    # SIGTERM's status is what the reclaim itself leaves, and the console notes the stop (stopped_at) only when it
    # next reads the cluster, after the command has already gone: such an end came with the reclaim.
    if ended.code == clusters.TERMINATED:
        return False
    return ended.at < instance.stopped_at


def _watch_starting(job: Job, instance) -> None:
    if instance.status == Status.RUNNING:
        transition(job, State.RUNNING, started_at=instance.running_since)
        arrears.notify(job.owner_id, NotificationKind.JOB_STARTED, name=job.name, job=str(job.public_id))
    elif instance.status in MACHINE_GONE:
        ended = workload_exit(instance)
        if ended is None:
            _machine_gone(job)
            return
        # The command ended before the machine was seen running (a short one on a cluster): it ran all the same.
        transition(job, State.RUNNING, started_at=instance.running_since or ended.at or timezone.now())
        watch(job)
    elif instance.status_detail:
        note(job, instance.status_detail)  # why it waits, in the cluster's queue or for its machine


def _requeue(job: Job) -> None:
    """A spot job whose cards were reclaimed goes back to the queue, in the place its submission gave it: its machine
    is released (billed up to the reclaim, which the machine's own session already ended at) and, where a cluster
    queues machines, a new one is submitted at once to wait there for cards. A reclaim does not use up one of the
    job's retries; the command runs again from the start, and resumes from a checkpoint it keeps in its outputs
    folder."""
    at = min(timezone.now(), deadline(job)) if job.started_at else timezone.now()
    with transaction.atomic():
        transition(
            job,
            State.QUEUED,
            detail=_("its spot cards were reclaimed: back in the queue"),
            started_at=None,
            ended_at=None,
            attempts=max(job.attempts - 1, 0),
            cluster_job={},
        )
        release_machine(job, at)
        if clusters.queued_by_cluster(job):
            place(job.pk)


def deadline(job: Job):
    return job.started_at + timedelta(seconds=job.timeout_seconds)


def _finish(job: Job, code: int | None, *, at=None) -> None:
    now = at or timezone.now()
    with transaction.atomic():
        if code == 0:
            transition(job, State.SUCCEEDED, exit_code=0, ended_at=now)
        else:
            detail = _("exited with status %(code)s") % {"code": code} if code is not None else _("exit status unknown")
            transition(job, State.FAILED, detail=detail, exit_code=code, ended_at=now)
        release_machine(job, now)
        if code == 0:
            arrears.notify(job.owner_id, NotificationKind.JOB_SUCCEEDED, name=job.name, job=str(job.public_id))
        else:
            _failed(job)


def _machine_gone(job: Job, *, at=None) -> None:
    detail = job.instance.status_detail or Status(job.instance.status).label
    at = at or timezone.now()
    with transaction.atomic():
        transition(job, State.FAILED, detail=_("its machine ended: %(why)s") % {"why": detail}, ended_at=at)
        release_machine(job, at)
        _failed(job)


def _failed(job: Job) -> None:
    """A failed job with retries left goes back to the queue (a new machine); otherwise its owner is told."""
    if job.attempts <= job.retries:
        transition(
            job,
            State.QUEUED,
            detail=_("retry %(n)s of %(of)s") % {"n": job.attempts, "of": job.retries},
            queued_at=timezone.now(),
            started_at=None,
            ended_at=None,
            cluster_job={},  # the last attempt's cluster job is over; the next attempt gets its own
        )
        return
    arrears.notify(job.owner_id, NotificationKind.JOB_FAILED, name=job.name, job=str(job.public_id), code=job.exit_code)


def _time_out(job: Job) -> None:
    """Past its timeout: the machine is released and billing ends at the timeout itself, not at the moment this
    beat noticed (a late beat costs the user nothing); a cluster that ended it before the console's own deadline
    (its clock started when the node started it) ends it now, never later than now."""
    at = min(timezone.now(), deadline(job))
    with transaction.atomic():
        transition(job, State.TIMED_OUT, detail=_("killed at its timeout"), ended_at=at)
        release_machine(job, at)
        arrears.notify(
            job.owner_id,
            NotificationKind.JOB_TIMED_OUT,
            name=job.name,
            job=str(job.public_id),
            seconds=job.timeout_seconds,
        )


def release_machine(job: Job, at=None) -> None:
    """Release the job's machine; billing stops at ``at`` (the moment the job ended; default now), to the started
    minute. Nothing if it has none or it is going already."""
    instance = job.instance
    if instance is None or instance.status in (Status.RELEASING, Status.RELEASED):
        return
    _keep_log(job)
    charges.close_usage(instance.public_id, ended_at=at or timezone.now())
    try:
        lifecycle.release(instance)
    except Conflict:
        instance.refresh_from_db()
        if instance.status not in (Status.RELEASING, Status.RELEASED):
            raise


def _keep_log(job: Job) -> None:
    """Keep the tail of the machine's log on the job before the machine (and its log) is released."""
    try:
        tail = logs.read_logs(job.instance, tail=KEPT_LOG_LINES)
    except ServiceError as exc:
        logger.warning("keeping the log of job %s: %s", job.public_id, exc.message)
        return
    if not tail.simulated:
        job.log = "".join(f"{line}\n" for line in tail.lines)
        Job.objects.filter(pk=job.pk).update(log=job.log)
