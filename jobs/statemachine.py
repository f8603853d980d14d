"""The one function that changes a job's state, and the events it writes."""

from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from core.errors import Conflict

from .choices import TRANSITIONS, State
from .models import Job, JobEvent


def check_move(job: Job, to: str) -> None:
    """Raise Conflict (409) when ``job`` may not move to ``to``."""
    if to not in TRANSITIONS[job.state]:
        raise Conflict(
            _("Job “%(name)s” is %(state)s and cannot become %(target)s.")
            % {"name": job.name, "state": State(job.state).label.lower(), "target": State(to).label.lower()},
            code="invalid_transition",
        )


def transition(job: Job, to: str, *, detail: str = "", at=None, **changes) -> Job:
    """Move ``job`` to ``to`` if the move table allows it and nobody moved it meanwhile (compare-and-set on the old
    state), write the event, and apply ``changes`` to the same row. Raises Conflict otherwise."""
    check_move(job, to)
    old = job.state
    at = at or timezone.now()
    fields = {"state": to, "state_detail": detail[:255], **changes}
    with transaction.atomic():
        if not Job.objects.filter(pk=job.pk, state=old).update(**fields):
            job.refresh_from_db(fields=["state"])
            check_move(job, to)
            raise Conflict(_("The job changed meanwhile; try again."), code="concurrent_change")
        JobEvent.objects.create(job=job, old=old, new=to, detail=detail[:255], at=at)
    for name, value in fields.items():
        setattr(job, name, value)
    return job


def note(job: Job, detail: str) -> None:
    """A notice that is not a transition (old = new), written once per distinct detail: why a queued job waits."""
    if job.state_detail == detail[:255]:
        return
    Job.objects.filter(pk=job.pk, state=job.state).update(state_detail=detail[:255])
    job.state_detail = detail[:255]
    JobEvent.objects.create(job=job, old=job.state, new=job.state, detail=detail[:255], at=timezone.now())
