"""What an instance has attached besides its system disk: hub mounts, data disks and the user's cloud storage.

* Hub mounts: storage mounts and unmounts models and data sets of the hub (read-only, metadata handed to the
  backend, hot-plug on a running instance).
* Data disks: storage attaches and detaches them (hot-plug on a running instance).
* ``/root/shared``: every instance of a person mounts their cloud storage there at each start; a team's instance
  mounts the team's folder at ``/root/shared-team`` instead.

Instances import nothing of storage: storage registers its side with ``core.attaching`` when Django starts and
these functions ask it (what storage asks of instances in turn is ``instances.machines``). The lifecycle calls two
hooks: :func:`apply` right after the backend accepted a start (it hands the backend every mount and disk again —
backends treat repeats as no-ops — so a restart on another node of the zone finds its disks and mounts there too)
and :func:`on_released` when an instance is released (disks are detached and kept, mounts go).

What a backend needs for ``/root/shared``: the source handed over is ``cloudstorage/<account public id>``. With
``STORAGE=local`` cloud storage is a tree of the account's files at their paths (``storage.tree``), and the local
backend binds that very tree (a size-limited image of the storage quota), so the console and the machines share
one set of files; the index is refreshed from the tree when read. The simulated backend records the source and the
instance page lists the tree from the ``Entry`` rows. On S3 storage the bucket's prefix of the account is that tree:
storage mounts it on the host with rclone (``storage.s3mount``) and the local backend binds that mount.
"""

import logging

from core.attaching import attached
from teams.accounts import is_account

from .backends import BackendError, TransientBackendError, get_backend
from .choices import Status
from .models import Instance

log = logging.getLogger(__name__)

SHARED_TARGET = "/root/shared"
TEAM_SHARED_TARGET = "/root/shared-team"
# Mounts change on instances that are up, on their way up, or resting; not on one going down or gone.
MOUNTABLE = {Status.CREATING, Status.STARTING, Status.RUNNING, Status.STOPPED, Status.PREEMPTED, Status.FAILED}


def shared_source(user) -> str:
    return f"cloudstorage/{user.public_id}"


def shared_target(instance: Instance) -> str:
    """Where the instance's owner's cloud storage is mounted: a person's at ``/root/shared``, a team's folder at
    ``/root/shared-team``. A team's machine never mounts a member's own folder: every member who may operate it
    can enter it, and one member's files are not the others'."""
    return TEAM_SHARED_TARGET if is_account(instance.owner) else SHARED_TARGET


# The launch wizard: a data disk and mounts -----------------------------------------------------------------------


def check_launch(user, request) -> None:
    """Refuse a launch's data disk or mounts before anything is reserved (bad input: 400)."""
    attached().check_launch(user, request)


def at_launch(instance: Instance, request) -> None:
    """Inside the launch's transaction: create and attach the data disk, record the mounts. The backend gets
    them when the machine is submitted (:func:`apply`)."""
    attached().at_launch(instance, request)


# Lifecycle hooks -------------------------------------------------------------------------------------------------


def apply(instance: Instance) -> None:
    """Hand the backend everything attached to ``instance`` after a (re)submit: ``/root/shared``, the data disks
    and the hub mounts. Idempotent. A permanent refusal is logged, not fatal: the machine runs without it and
    the page still lists what the user asked for."""
    backend = get_backend(instance.backend_name)
    calls = [lambda: backend.mount(instance, shared_source(instance.owner), shared_target(instance))]
    calls += attached().calls(instance, backend)
    for call in calls:
        try:
            call()
        except TransientBackendError:
            raise
        except BackendError as exc:
            log.warning("backend %s could not attach to %s: %s", backend.name, instance.public_id, exc)


def on_released(instance: Instance) -> None:
    """Inside the release's transaction: data disks are detached and kept; hub mounts end."""
    attached().on_released(instance)


def shared_folder(account_public_id: str):
    """Where the account's cloud storage is on this host, or None where it is not a local folder (S3)."""
    return attached().shared_folder(account_public_id)


def mounted_shared(account_public_id: str):
    """The account's cloud storage already mounted on this host by storage (S3), or None where the backend makes
    the folder's image itself."""
    return attached().mounted_shared(account_public_id)


def panel_context(instance: Instance) -> dict:
    """The instance page's disks-and-mounts panel (storage's)."""
    return attached().panel_context(instance)
