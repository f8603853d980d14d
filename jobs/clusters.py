"""Jobs whose machines a cluster's own scheduler queues (Slurm): the console does not hold them in its queue but
submits them at once, with the timeout as the cluster's time limit, and reads back how the cluster sees them — the
job's state and the reason it waits — at each watch.

The end of such a job is the cluster's word where the agent's is ambiguous: a workload ended by SIGTERM may have
been cancelled, preempted or killed at its time limit, and only the cluster's final state tells which.
"""

import logging
from datetime import timedelta

from django.utils import timezone

from catalog.models import Node
from instances.backends import BackendError, get_backend

from .exits import Exit
from .models import Job

logger = logging.getLogger(__name__)

# How long an ambiguous end waits for the cluster's word: Slurm forgets a finished job after MinJobAge (300 s by
# default), so after that its final state may never come and the agent's status decides.
CLUSTER_WORD_WAIT = timedelta(minutes=5)

# The status of a workload that SIGTERM ended (the shell's 128 + 15): what a time limit, a preemption and a cancel
# all look like from inside the machine.
TERMINATED = 143
# The cluster's states in which its job has ended for good (a preempted spot job is requeued instead: PENDING).
ENDED = frozenset(
    {"COMPLETED", "FAILED", "TIMEOUT", "CANCELLED", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE"}
)


def queued_by_cluster(job: Job) -> bool:
    """Whether the nodes of the job's chip are run by a backend with a scheduler of its own: the job is then
    submitted there at once and waits in that queue, not the console's."""
    if not job.chip_id:
        return False
    names = Node.objects.schedulable().filter(chip_id=job.chip_id).values_list("backend_name", flat=True).distinct()
    return any(get_backend(name).has_scheduler for name in names)


def time_limit_minutes(job: Job) -> int:
    """The cluster's time limit for the job: its timeout, in the whole minutes Slurm counts (rounded up, so the
    cluster never ends a job before its timeout)."""
    return -(-job.timeout_seconds // 60)


def read_queues(jobs) -> None:
    """Keep each job's ``cluster_job`` as its cluster shows it now (one listing per cluster); unchanged while a
    cluster does not answer or has forgotten the job."""
    by_backend: dict[str, list[Job]] = {}
    for job in jobs:
        if job.instance is not None and get_backend(job.instance.backend_name).has_scheduler:
            by_backend.setdefault(job.instance.backend_name, []).append(job)
    for name, members in by_backend.items():
        try:
            entries = get_backend(name).queue_entries([job.instance for job in members])
        except BackendError as exc:
            logger.info("reading the %s queue: %s", name, exc)
            continue
        for job in members:
            entry = entries.get(job.instance.public_id)
            if entry is not None and entry != job.cluster_job:
                job.cluster_job = entry
                Job.objects.filter(pk=job.pk).update(cluster_job=entry)


def timed_out(job: Job) -> bool:
    """The cluster ended the job at its time limit."""
    return job.cluster_job.get("state") == "TIMEOUT"


def undecided(job: Job, ended: Exit) -> bool:
    """A workload that SIGTERM ended while the cluster still runs its job: wait (a few minutes at most) for the
    cluster's final state, which says whether that was the time limit, a preemption or a cancel."""
    state = job.cluster_job.get("state")
    recent = ended.at is None or timezone.now() < ended.at + CLUSTER_WORD_WAIT
    return ended.code == TERMINATED and bool(state) and state not in ENDED and recent
