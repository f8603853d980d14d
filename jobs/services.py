"""The operations on jobs a user asks for: submit, cancel, rerun; and the read-side figures the pages and the API
show (the most a job can cost, its place in the queue). Placing queued jobs on machines and watching them run is
``jobs.running``."""

import uuid
from dataclasses import dataclass, field
from decimal import Decimal

from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from billing.money import to_cents
from core.errors import Conflict, NotFound, ServiceError
from core.field_errors import FieldError
from core.validators import clean_display_name
from instances import charges, images, logs, queue
from instances.backends import get_backend
from instances.choices import Status
from instances.environment import check_boot_options
from teams.access import reaches, refuse_if_seen

from . import choosing, clusters, running, tasks
from .choices import FINISHED, JobBackend, State
from .models import Job, JobEvent, JobSchedule
from .statemachine import transition

MIN_TIMEOUT_SECONDS = 60
MAX_TIMEOUT_SECONDS = 7 * 24 * 3600
MAX_RETRIES = 10
SECONDS_PER_HOUR = Decimal(3600)


@dataclass(frozen=True)
class JobRequest:
    """What a submission asks for; ``backend`` a family, ``cpu`` or ``auto``; ``max_price_per_hour`` optional."""

    name: str
    image: str
    command: str
    backend: str = JobBackend.AUTO
    cards: int = 1
    timeout_seconds: int = 3600
    max_price_per_hour: Decimal | None = None
    spot: bool = False
    retries: int = 0
    env: dict = field(default_factory=dict)


def get_job(user, public_id, action: str = "view") -> Job:
    """The caller's job (or their team's, as their role allows); someone else's and a missing one are one 404."""
    try:
        key = uuid.UUID(str(public_id))
    except ValueError:
        key = None
    job = Job.objects.with_related().filter(public_id=key).first() if key else None
    if job is not None and not reaches(user, job.owner_id, action):
        job = None
    if job is None:
        if key:
            refuse_if_seen(user, Job.objects.all(), action, public_id=key)
        raise NotFound(_("No such job."))
    return job


def max_cost(timeout_seconds: int, per_hour: Decimal) -> Decimal:
    """The most a job can cost: its hourly price (or ceiling) for the whole timeout, to the fen. Billing is per
    started minute, so the timeout is counted in whole minutes."""
    minutes = -(-int(timeout_seconds) // 60)
    return to_cents(Decimal(per_hour) * minutes / 60)


def _check(request: JobRequest) -> None:
    if request.backend not in JobBackend.values:
        raise FieldError(
            "backend",
            _("Unknown backend “%(backend)s”: use one of %(names)s.")
            % {"backend": request.backend, "names": ", ".join(JobBackend.values)},
            code="unknown_backend",
        )
    if not MIN_TIMEOUT_SECONDS <= request.timeout_seconds <= MAX_TIMEOUT_SECONDS:
        raise FieldError(
            "timeout_seconds", _("The timeout must be between one minute and seven days."), code="invalid_timeout"
        )
    if not 0 <= request.retries <= MAX_RETRIES:
        raise FieldError("retries", _("Retries must be between 0 and 10."), code="invalid_retries")
    if request.max_price_per_hour is not None and request.max_price_per_hour <= 0:
        raise FieldError("max_price_per_hour", _("The price ceiling must be above zero."), code="invalid_ceiling")
    if not (request.command or "").strip():
        raise FieldError("command", _("Give the command the job runs."), code="invalid_command")


def _boot(owner, request: JobRequest):
    try:
        return check_boot_options(owner, start_command=request.command, env=request.env)
    except FieldError as exc:
        raise FieldError("command" if exc.field == "start_command" else exc.field, exc.message, code=exc.code) from exc


def quote_job(user, request: JobRequest) -> choosing.Choice:
    """Where ``request`` would run and at what price, as the submit form's live quote shows it; ServiceError when
    nothing fits."""
    _check(request)
    cards = 0 if request.backend == JobBackend.CPU else request.cards
    return choosing.choose(
        user,
        backend=request.backend,
        image=request.image,
        cards=cards,
        ceiling=request.max_price_per_hour,
        spot=request.spot,
    )


def submit(owner, request: JobRequest, *, by=None) -> Job:
    """Check the request, choose where it runs, check the balance pays its first hour (as a launch does), and
    queue it; the placement beat launches its machine (at once when a card is free). Where a cluster's own
    scheduler runs the chip's nodes (Slurm), the machine is submitted there at once instead. ``owner`` owns and pays (a
    person or a team's account); ``by`` is the person who asked."""
    name = clean_display_name(request.name, max_length=64, field_label=_("job"))
    _check(request)
    boot = _boot(owner, request)
    choice = quote_job(owner, request)
    now = timezone.now()
    with transaction.atomic():
        # The same gate a launch passes (it locks the wallet): one hour of the chosen machine on top of what runs,
        # within the budget of the member who asks on a team's wallet.
        charges.check_launch_funds(owner, choice.quote, by=by)
        # Then, in a launch's order of locks, the image: a removal under way is waited for, and one that ended since
        # the quote leaves nothing to queue (the removal, in turn, refuses while a job is queued on the image).
        images.hold(choice.image)
        job = Job.objects.create(
            owner=owner,
            submitted_by=by or owner,
            name=name,
            image=choice.image,
            backend=request.backend,
            cards=choice.quote.cards,
            command=boot.start_command,
            env=boot.env,
            timeout_seconds=request.timeout_seconds,
            max_price_per_hour=request.max_price_per_hour,
            spot=request.spot,
            retries=request.retries,
            chip=choice.chip,
            family=choice.family,
            choice=choice.figures,
            price_per_hour=choice.quote.payable_per_hour,
            queued_at=now,
        )
        JobEvent.objects.create(job=job, old="", new=State.QUEUED, detail=job.choice_reason[:255], at=now)
        if clusters.queued_by_cluster(job):
            # The cluster's scheduler is the queue: the machine is submitted now and waits there for its cards.
            running.place(job.pk)
            job.refresh_from_db()
        else:
            _enqueue_placement()
    return job


def _enqueue_placement() -> None:
    transaction.on_commit(tasks.place_soon)


def cancel(job: Job) -> Job:
    """Cancel a queued or running job: its machine, if any, is released at once and billing stops there."""
    if job.state in FINISHED:
        raise_finished(job)
    with transaction.atomic():
        now = timezone.now()
        transition(job, State.CANCELLED, detail=_("cancelled by its owner"), ended_at=now)
        running.release_machine(job, now)
        _enqueue_placement()  # its card is free for the next queued job
    return job


def raise_finished(job: Job) -> None:
    raise Conflict(
        _("Job “%(name)s” has ended (%(state)s).") % {"name": job.name, "state": State(job.state).label.lower()},
        code="invalid_transition",
    )


def rerun(job: Job, *, by=None) -> Job:
    """A new job with the same request as ``job`` (which must have ended), placed afresh."""
    if job.state not in FINISHED:
        raise ServiceError(_("Job “%(name)s” has not ended yet.") % {"name": job.name}, code="invalid_transition")
    request = JobRequest(
        name=job.name,
        image=job.image,
        command=job.command,
        backend=job.backend,
        cards=job.cards or 1,
        timeout_seconds=job.timeout_seconds,
        max_price_per_hour=job.max_price_per_hour,
        spot=job.spot,
        retries=job.retries,
        env=job.env,
    )
    return submit(job.owner, request, by=by)


def queue_places(jobs) -> dict[int, queue.Place]:
    """pk → place in the queue (1: next) and the time it should start by, of each queued job among ``jobs``,
    counted over everything waiting for a card (every account's jobs and waiting launches) in the order placement
    takes them."""
    wanted = {(queue.JOB, job.pk) for job in jobs if job.state == State.QUEUED}
    return {pk: place for (_kind, pk), place in queue.places(wanted, now=timezone.now()).items()}


def queue_positions(jobs) -> dict[int, int]:
    """pk → place in the queue (1: next) of each queued job among ``jobs``."""
    return {pk: place.position for pk, place in queue_places(jobs).items()}


@dataclass(frozen=True)
class JobLog:
    lines: list[str]
    simulated: bool


def job_log(job: Job, *, tail: int = logs.DEFAULT_TAIL) -> JobLog:
    """The last ``tail`` lines the job's command wrote: read from its machine while it has one, else the lines kept
    when the machine was released. Unavailable (503) when the machine's log cannot be read right now."""
    tail = logs.check_tail(tail)
    instance = job.instance
    if instance is not None and instance.status not in (Status.RELEASING, Status.RELEASED):
        read = logs.read_logs(instance, tail=tail)
        return JobLog(read.lines, read.simulated)
    simulated = instance is not None and get_backend(instance.backend_name).simulated
    return JobLog(logs.as_lines(job.log, tail), simulated and not job.log)


def why_an_image_is_needed(sender, *, image, slugs, **kwargs) -> str | None:
    """Why an imported image may not be removed yet: a queued job or a schedule that is not suspended boots from it
    (a running job's machine is an instance, which the marketplace checks itself). Connected to
    ``marketplace.signals.image_removal_asked``."""
    job = Job.objects.filter(state=State.QUEUED, image__in=slugs).only("name").first()
    if job is not None:
        return _("Job “%(name)s” is queued to run on this image; cancel it before removing the image.") % {
            "name": job.name
        }
    schedule = JobSchedule.objects.filter(suspended=False, image__in=slugs).only("name").first()
    if schedule is not None:
        return _("Schedule “%(name)s” runs jobs on this image; suspend or delete it before removing the image.") % {
            "name": schedule.name
        }
    return None


def family_warning(job: Job) -> str:
    """What to tell the person who submitted ``job`` when its image was built for another chip family than its
    cards' (an imported image runs on any card, its programs may find no accelerator there); "" otherwise."""
    return images.family_warning(job.image, job.family if job.chip_id else None)
