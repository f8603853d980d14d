"""Jobs on a cron schedule (定时任务): create, suspend, resume, delete, and the beat step that submits each due run
as an ordinary job.

The rules, stated once:

* A schedule is a standard five-field cron expression or a macro (``@hourly``, ``@daily``…) read in its time zone,
  Asia/Shanghai unless the user picks another. Expressions are read by croniter.
* A run is due at ``next_run_at``. The beat moves ``next_run_at`` on with a compare-and-set before it submits, so
  two overlapping beats never submit the same run; a unique (schedule, due time) row records what became of it.
* Runs missed while the beat was down (or while the schedule was suspended) are not caught up one by one: the
  latest missed one runs once, and the next due time is the first one after now.
* Without ``allow_overlap``, a due run whose previous run has not ended is skipped, and the skip is recorded.
* Where a zone changes its clocks, a time that does not exist (02:30 on the spring-forward night) runs at the first
  time after it, and a fixed time that happens twice (01:30 on the fall-back night) runs once, as cron does; a
  schedule on every hour keeps running every hour.
"""

import uuid
import zoneinfo
from dataclasses import dataclass
from datetime import UTC, datetime

from croniter import croniter
from django.db import IntegrityError, transaction
from django.utils import timezone, translation
from django.utils.translation import gettext as _

from billing import arrears
from billing.choices import NotificationKind
from core.errors import Conflict, NotFound, ServiceError
from core.field_errors import FieldError
from core.time_zones import DEFAULT_TIMEZONE, clean_timezone
from core.validators import clean_display_name
from instances import images, waiting
from instances.environment import check_boot_options
from teams.access import reaches, refuse_if_seen

from . import services
from .choices import FINISHED, State
from .models import JobSchedule, ScheduleRun

MACROS = {"@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"}
# The name of the expression's format in the API's schema, and what it says.
CRON_FORMAT = "cron"
CRON_RULES = (
    "Five cron fields (minute hour day-of-month month day-of-week; numbers, names, *, lists, ranges and steps), "
    "e.g. 0 2 * * *, or one of " + ", ".join(sorted(MACROS)) + "."
)


@dataclass(frozen=True)
class ScheduleRequest:
    """A job's request, its cron expression and zone, and whether a run may start while the previous one runs."""

    job: "services.JobRequest"  # read through the module: services imports the tasks that import this
    cron: str
    timezone: str = DEFAULT_TIMEZONE
    allow_overlap: bool = False


def clean_cron(expression) -> str:
    """The expression, trimmed, if it is five cron fields or a macro; FieldError otherwise."""
    text = " ".join(str(expression or "").split())
    valid = text.lower() in MACROS or (len(text.split()) == 5 and croniter.is_valid(text))
    if not valid:
        raise FieldError(
            "cron",
            _("“%(cron)s” is not a schedule: give five cron fields, e.g. “0 2 * * *” (02:00 every day), or @hourly.")
            % {"cron": text},
            code="invalid_cron",
        )
    return text.lower() if text.startswith("@") else text


def next_due(cron: str, zone: str, after: datetime, previous: datetime | None = None) -> datetime:
    """The first due time strictly after ``after`` (UTC). ``previous``: the due time before it, so a fixed time
    that a clock change makes happen twice runs once."""
    tz = zoneinfo.ZoneInfo(zone)
    times = croniter(cron, after.astimezone(tz))
    due = times.get_next(datetime)
    if previous is not None and not _every_hour(cron):
        while due.replace(tzinfo=None) == previous.astimezone(tz).replace(tzinfo=None):
            due = times.get_next(datetime)
    return due.astimezone(UTC)


def _every_hour(cron: str) -> bool:
    return cron == "@hourly" or croniter(cron).expanded[1] == ["*"]


def get_schedule(user, public_id, action: str = "view") -> JobSchedule:
    """The caller's schedule (or their team's, as their role allows); someone else's and a missing one are one 404."""
    try:
        key = uuid.UUID(str(public_id))
    except ValueError:
        key = None
    schedule = JobSchedule.objects.filter(public_id=key).first() if key else None
    if schedule is not None and not reaches(user, schedule.owner_id, action):
        schedule = None
    if schedule is None:
        if key:
            refuse_if_seen(user, JobSchedule.objects.all(), action, public_id=key)
        raise NotFound(_("No such schedule."))
    return schedule


def create(owner, request: ScheduleRequest, *, by=None) -> JobSchedule:
    """Check the job's request as a submission would (except the balance, checked at each run), the expression and
    the zone, and save the schedule with its first due time."""
    job = request.job
    name = clean_display_name(job.name, max_length=64, field_label=_("schedule"))
    cron, zone = clean_cron(request.cron), clean_timezone(request.timezone)
    try:
        boot = check_boot_options(owner, start_command=job.command, env=job.env)
    except FieldError as exc:
        raise FieldError("command" if exc.field == "start_command" else exc.field, exc.message, code=exc.code) from exc
    choice = services.quote_job(owner, job)  # the same checks and choice a submission makes now
    with transaction.atomic():
        images.hold(choice.image)  # as a submission does: not removed under the schedule being saved
        return JobSchedule.objects.create(
            owner=owner,
            created_by=by or owner,
            name=name,
            image=choice.image,
            backend=job.backend,
            cards=job.cards,
            command=boot.start_command,
            env=boot.env,
            timeout_seconds=job.timeout_seconds,
            max_price_per_hour=job.max_price_per_hour,
            spot=job.spot,
            retries=job.retries,
            cron=cron,
            timezone=zone,
            allow_overlap=request.allow_overlap,
            next_run_at=next_due(cron, zone, timezone.now()),
        )


def suspend(schedule: JobSchedule) -> JobSchedule:
    """No run is due while suspended."""
    if not JobSchedule.objects.filter(pk=schedule.pk, suspended=False).update(suspended=True, next_run_at=None):
        raise Conflict(_("Schedule “%(name)s” is suspended already.") % {"name": schedule.name}, code="suspended")
    schedule.suspended, schedule.next_run_at = True, None
    return schedule


def resume(schedule: JobSchedule) -> JobSchedule:
    """Due again from now on: what was missed while suspended does not run. An imported image removed while the
    schedule was suspended is refused here (404 ``unknown_image``), not at each run."""
    due = next_due(schedule.cron, schedule.timezone, timezone.now())
    with transaction.atomic():
        images.hold(schedule.image)
        resumed = JobSchedule.objects.filter(pk=schedule.pk, suspended=True).update(suspended=False, next_run_at=due)
    if not resumed:
        raise Conflict(_("Schedule “%(name)s” is not suspended.") % {"name": schedule.name}, code="not_suspended")
    schedule.suspended, schedule.next_run_at = False, due
    return schedule


def delete(schedule: JobSchedule) -> None:
    """The schedule and its record of runs go; the jobs it submitted stay, with their logs and bills."""
    schedule.delete()


def job_request(schedule: JobSchedule) -> "services.JobRequest":
    return services.JobRequest(
        name=schedule.name,
        image=schedule.image,
        command=schedule.command,
        backend=schedule.backend,
        cards=schedule.cards,
        timeout_seconds=schedule.timeout_seconds,
        max_price_per_hour=schedule.max_price_per_hour,
        spot=schedule.spot,
        retries=schedule.retries,
        env=schedule.env,
    )


# The beat ----------------------------------------------------------------------------------------------------------


def fire_due(now: datetime | None = None) -> int:
    """Submit every due run (or record why not). Returns how many schedules were due."""
    now = now or timezone.now()
    due = JobSchedule.objects.filter(suspended=False, next_run_at__lte=now).values_list("pk", "next_run_at")
    for pk, due_at in list(due):
        _fire(pk, due_at, now)
    return len(due)


def _fire(pk: int, due_at: datetime, now: datetime) -> None:
    schedule = JobSchedule.objects.select_related("owner", "created_by").get(pk=pk)
    following = next_due(schedule.cron, schedule.timezone, max(now, due_at), previous=due_at)
    with transaction.atomic():
        # The claim: only the beat that moves next_run_at on from this due time submits it.
        if not JobSchedule.objects.filter(pk=pk, suspended=False, next_run_at=due_at).update(next_run_at=following):
            return
        try:
            with transaction.atomic():
                run = ScheduleRun.objects.create(schedule=schedule, due_at=due_at, outcome="", at=now)
        except IntegrityError:
            return  # recorded by another beat already
        # Why a run did not start is written in the language of who made the schedule, as a job's notices are.
        with translation.override(waiting.language_of(schedule.created_by_id or schedule.owner_id)):
            _decide(schedule, run)


def _decide(schedule: JobSchedule, run: ScheduleRun) -> None:
    previous = (
        ScheduleRun.objects.filter(schedule=schedule, job__isnull=False).exclude(pk=run.pk).select_related("job")
    ).first()
    if previous and previous.job.state not in FINISHED and not schedule.allow_overlap:
        run.outcome = ScheduleRun.Outcome.SKIPPED
        run.detail = _("The previous run (%(job)s) is still %(state)s.") % {
            "job": previous.job.public_id,
            "state": State(previous.job.state).label.lower(),
        }
    else:
        try:
            with transaction.atomic():
                run.job = services.submit(schedule.owner, job_request(schedule), by=schedule.created_by)
            run.outcome = ScheduleRun.Outcome.SUBMITTED
        except ServiceError as exc:
            run.outcome, run.detail = ScheduleRun.Outcome.REFUSED, str(exc.message)[:255]
    run.save(update_fields=["outcome", "detail", "job"])
    if run.outcome != ScheduleRun.Outcome.SUBMITTED and _first_miss(schedule, run):
        arrears.notify(
            schedule.owner_id,
            NotificationKind.SCHEDULE_MISSED,
            name=schedule.name,
            schedule=str(schedule.public_id),
            why=run.detail,
            path=schedule.get_absolute_url(),  # the e-mail's and the wallet card's link: the schedule's runs
        )


def _first_miss(schedule: JobSchedule, run: ScheduleRun) -> bool:
    """Whether ``run`` (not submitted) is the first since a run was submitted: a schedule that keeps missing (a
    long run that every due time overlaps, a balance left empty) tells its owner once, not at every due time; its
    page lists every run."""
    before = ScheduleRun.objects.filter(schedule=schedule, due_at__lt=run.due_at).order_by("-due_at").first()
    return before is None or before.outcome == ScheduleRun.Outcome.SUBMITTED
