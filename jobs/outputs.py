"""A job's outputs folder: ``jobs/<job id>/`` in its owner's cloud storage (a person's or a team's). It is made
before the job's machine is launched, and the command finds it in ``$OUTPUT_DIR`` — the same folder inside the
machine, under the cloud storage every machine of the account mounts (``/root/shared``, a team's
``/root/shared-team``). What the command writes there is in the storage page and API after the job, with no copy."""

from django.urls import reverse

from instances.attachments import SHARED_TARGET, TEAM_SHARED_TARGET
from instances.backends import get_backend
from storage import services as storage
from storage.models import Entry
from teams.accounts import is_account

from . import clusters
from .models import Job

ROOT_FOLDER = "jobs"
ENV_NAME = "OUTPUT_DIR"


def folder_path(job: Job) -> str:
    """The folder in the owner's cloud storage, as the storage page and API name it."""
    return f"/{ROOT_FOLDER}/{job.public_id}"


def inside_path(job: Job) -> str:
    """The same folder inside the job's machine."""
    target = TEAM_SHARED_TARGET if is_account(job.owner) else SHARED_TARGET
    return f"{target}{folder_path(job)}"


def variables(job: Job, *, cluster: bool) -> dict[str, str]:
    """The variables the job's command gets: ``$OUTPUT_DIR``, except on a cluster (see ``on_cluster``)."""
    return {} if cluster else {ENV_NAME: inside_path(job)}


def make_folder(job: Job, *, cluster: bool) -> None:
    """Make the folder once the job's machine has its card (again harmless: a retry keeps what the first attempt
    wrote); nothing on a cluster."""
    if not cluster:
        storage.make_folders(job.owner, folder_path(job))


# A machine's cloud storage is bound in just after the machine starts, so the command waits for its folder (at most
# a minute); without it the outputs would be written to the machine's own disk and lost with it, so the job fails
# at once instead of after hours of work.
WAIT_FOR_FOLDER = (
    'i=0; while [ ! -d "$OUTPUT_DIR" ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done\n'
    '[ -d "$OUTPUT_DIR" ] || {{ echo "{missing}" >&2; exit 75; }}\n'
)


def on_cluster(job: Job) -> bool:
    """Whether the job runs where a cluster's scheduler runs the nodes (Slurm). The nodes do not mount the console's
    cloud storage, so such a job has no outputs folder yet: its command keeps what it writes wherever it chooses."""
    if job.instance is not None:
        return get_backend(job.instance.backend_name).has_scheduler
    return clusters.queued_by_cluster(job)


def start_command(job: Job, *, cluster: bool) -> str:
    """The job's command as its machine runs it: after its outputs folder is there."""
    if cluster:
        return job.command
    missing = "gpucloud: the outputs folder $OUTPUT_DIR is not mounted; the job did not start."
    return WAIT_FOR_FOLDER.format(missing=missing) + job.command


def folder(job: Job) -> Entry | None:
    """The folder's row, once made (None before the job was placed, or after the owner deleted it)."""
    return Entry.objects.for_user(job.owner).folders().filter(path=folder_path(job)).first()


def folder_url(job: Job) -> str:
    """The storage page of the folder, or "" when there is none."""
    made = folder(job)
    return reverse("storage:folder", args=[made.public_id]) if made else ""
