"""What an instance has attached besides its system disk: hub mounts, data disks and the user's cloud storage.

* Hub mounts: ``storage.mounts`` mounts and unmounts models and data sets of the hub (read-only, metadata handed to
  the backend, hot-plug on a running instance).
* Data disks: ``storage.disks`` attaches and detaches them (hot-plug on a running instance).
* ``/root/shared``: every instance of a person mounts their cloud storage there at each start; a team's instance
  mounts the team's folder at ``/root/shared-team`` instead.

The lifecycle calls two hooks: :func:`apply` right after the backend accepted a start (it hands the backend every
mount and disk again — backends treat repeats as no-ops — so a restart on another node of the zone finds its disks
and mounts there too) and :func:`on_released` when an instance is released (disks are detached and kept, mounts go).

What a backend needs for ``/root/shared``: the source handed over is ``cloudstorage/<account public id>``. With
``STORAGE=local`` cloud storage is a tree of the account's files at their paths (``storage.tree``), and the local
backend binds that very tree (a size-limited image of the storage quota), so the console and the machines share
one set of files; the index is refreshed from the tree when read. The simulated backend records the source and the
instance page lists the tree from the ``Entry`` rows. On S3 storage a machine does not see the bucket's files yet.
"""

import logging

from django.utils.translation import gettext as _

from core.errors import ServiceError
from storage import tree
from storage.models import (
    CloudDisk,
    Entry,  # storage sits beside instances: read when the query is first built
)
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


# Hot-plug --------------------------------------------------------------------------------------------------------


def backend_call(instance: Instance, call, what: str = "mount") -> None:
    """Run ``call(backend)`` for a mount or a data disk. On a running instance a refusal undoes the whole change
    (the caller's transaction); elsewhere the start applies it anyway (:func:`apply`), so a backend that has no
    machine yet is fine and the refusal is only logged."""
    try:
        call(get_backend(instance.backend_name))
    except BackendError as exc:
        if instance.status == Status.RUNNING:
            raise ServiceError(
                _("The instance's machine refused the change: %(reason)s") % {"reason": exc}, code="backend_refused"
            ) from exc
        log.info("%s on %s deferred to its start: %s", what, instance.public_id, exc)


# The launch wizard: a data disk and mounts -----------------------------------------------------------------------


def check_launch(user, request) -> None:
    """Refuse a launch's data disk or mounts before anything is reserved (bad input: 400)."""
    from storage import disks, mounts

    if request.data_disk_gb:
        disks.price_of(request.data_disk_gb)
    mounts.check_launch(user, request.mounts)


def at_launch(instance: Instance, request) -> None:
    """Inside the launch's transaction: create and attach the data disk, record the mounts. The backend gets
    them when the machine is submitted (:func:`apply`)."""
    from storage import disks, mounts

    if request.data_disk_gb:
        name = _free_disk_name(instance)
        disks.create(instance.owner, name=name, size_gb=request.data_disk_gb, zone=instance.zone, instance=instance)
    mounts.at_launch(instance, request.mounts)


def _free_disk_name(instance: Instance) -> str:
    base = f"{instance.name[:55]}-data"
    taken = set(
        CloudDisk.objects.live().filter(owner=instance.owner, name__startswith=base).values_list("name", flat=True)
    )
    if base not in taken:
        return base
    return next(f"{base}-{n}" for n in range(2, len(taken) + 3) if f"{base}-{n}" not in taken)


# Lifecycle hooks -------------------------------------------------------------------------------------------------


def apply(instance: Instance) -> None:
    """Hand the backend everything attached to ``instance`` after a (re)submit: ``/root/shared``, the data disks
    and the hub mounts. Idempotent. A permanent refusal is logged, not fatal: the machine runs without it and
    the page still lists what the user asked for."""
    from storage import disks, mounts

    backend = get_backend(instance.backend_name)
    calls = [lambda: backend.mount(instance, shared_source(instance.owner), shared_target(instance))]
    calls += [
        lambda d=d: backend.attach_disk(instance, str(d.public_id), d.size_gb, name=d.name)
        for d in disks.attached_to(instance)
    ]
    calls += [lambda m=m: backend.mount(instance, m.repo, m.target) for m in mounts.mounts_of(instance)]
    for call in calls:
        try:
            call()
        except TransientBackendError:
            raise
        except BackendError as exc:
            log.warning("backend %s could not attach to %s: %s", backend.name, instance.public_id, exc)


def on_released(instance: Instance) -> None:
    """Inside the release's transaction: data disks are detached and kept; hub mounts end."""
    from storage import disks, mounts

    disks.release_from(instance)
    mounts.on_released(instance)


def shared_listing(user, limit: int = 20):
    """The top of the user's cloud storage as ``/root/shared`` shows it (the simulated view: ``Entry`` rows)."""
    if not user.is_authenticated:  # as Entry.objects.for_user
        return []

    tree.sync(user)  # what the account's machines wrote there
    return list(Entry.objects.filter(owner_id=user.pk, parent=None).listing_order()[:limit])
