"""What an instance has attached besides its system disk: hub mounts, data disks and the user's cloud storage.

* Hub mounts: a model or data set of the hub, read-only at ``HubItem.mount_path`` (``/root/public/<repo>`` for
  models, ``/root/datasets/<repo>`` for data sets). A mount is a ``storage.HubMount`` row plus a call to the
  backend's ``mount(instance, source, target)`` — metadata, never a copy — so it appears within seconds.
* Data disks: ``storage.disks`` attaches and detaches them (hot-plug on a running instance).
* ``/root/shared``: every instance of a user mounts their cloud storage there at each start.

The lifecycle calls two hooks: :func:`apply` right after the backend accepted a start (it hands the backend every
mount and disk again — backends treat repeats as no-ops — so a restart on another node of the zone finds its disks
and mounts there too) and :func:`on_released` when an instance is released (disks are detached and kept, mounts go).

What a backend needs for ``/root/shared``: cloud storage keeps each file's bytes under a fixed key
(``<owner>/<entry>``), not under its path, so a real backend cannot bind-mount a folder. The source handed over is
``cloudstorage/<user public id>``; the simulated backend records it and the instance page lists the tree from the
``Entry`` rows (labelled simulated). A real backend needs a read-write view of that tree: a FUSE file system over
the storage API (or an S3 gateway such as s3fs/goofys when ``STORAGE=s3``) that maps paths to keys through the
``Entry`` index, mounted on the node and bound into the job at ``/root/shared``.
"""

import logging
import re

from django.db import IntegrityError, transaction
from django.utils.translation import gettext as _

from console.errors import Conflict, NotFound, ServiceError

from .backends import BackendError, TransientBackendError, get_backend
from .choices import Status
from .models import Instance

log = logging.getLogger(__name__)

SHARED_TARGET = "/root/shared"
MAX_MOUNTS = 16
# Mounts change on instances that are up, on their way up, or resting; not on one going down or gone.
MOUNTABLE = {Status.CREATING, Status.STARTING, Status.RUNNING, Status.STOPPED, Status.PREEMPTED, Status.FAILED}


def shared_source(user) -> str:
    return f"cloudstorage/{user.public_id}"


def parse_repos(value) -> list[str]:
    """A list of repos from the API (a list) or a form (separated by commas, spaces or new lines); unique."""
    if value is None or value == "":
        return []
    if isinstance(value, str):
        value = re.split(r"[\s,，]+", value)
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
        raise ServiceError(_("Give the models and datasets to mount as a list of org/name."), code="invalid_mounts")
    repos = list(dict.fromkeys(v.strip() for v in value if v.strip()))
    if len(repos) > MAX_MOUNTS:
        raise ServiceError(
            _("An instance mounts at most %(max)s models and datasets.") % {"max": MAX_MOUNTS}, code="invalid_mounts"
        )
    return repos


def hub_item(user, repo: str):
    """An item ``user`` may see (public, or their own private one); bad input (400) otherwise."""
    from marketplace.hub.services import get_item

    try:
        return get_item(user, repo)
    except NotFound as exc:
        raise ServiceError(exc.message, code="unknown_repo") from exc


# Mounts ----------------------------------------------------------------------------------------------------------


def mounts_of(instance: Instance):
    from storage.models import HubMount

    return HubMount.objects.filter(instance=instance).order_by("target")


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


def _check_mountable(instance: Instance) -> None:
    if instance.status not in MOUNTABLE:
        raise Conflict(
            _("Instance “%(name)s” is %(status)s: mounts change on running, starting or stopped instances.")
            % {"name": instance.name, "status": instance.get_status_display().lower()},
            code="invalid_transition",
        )


def mount(user, instance: Instance, repo: str):
    """Mount the hub item ``repo`` read-only into ``instance`` (the caller's): metadata handed to the backend."""
    from marketplace.hub.services import record_mount
    from storage.models import HubMount

    item = hub_item(user, repo)
    _check_mountable(instance)
    with transaction.atomic():
        instance = Instance.objects.select_for_update().get(pk=instance.pk)
        _check_mountable(instance)
        if HubMount.objects.filter(instance=instance).count() >= MAX_MOUNTS:
            raise ServiceError(
                _("An instance mounts at most %(max)s models and datasets.") % {"max": MAX_MOUNTS},
                code="too_many_mounts",
            )
        try:
            with transaction.atomic():
                made = HubMount.objects.create(
                    instance=instance, item=item, repo=item.repo, kind=item.kind, target=item.mount_path
                )
        except IntegrityError as exc:
            raise Conflict(
                _("%(repo)s is already mounted at %(path)s.") % {"repo": item.repo, "path": item.mount_path},
                code="already_mounted",
            ) from exc
        backend_call(instance, lambda backend: backend.mount(instance, item.repo, item.mount_path))
        record_mount(item)
    return made


def unmount(user, instance: Instance, repo: str):
    """Unmount ``repo`` from ``instance``; a repo that is not mounted there is a 404."""
    from storage.models import HubMount

    with transaction.atomic():
        instance = Instance.objects.select_for_update().get(pk=instance.pk)
        made = HubMount.objects.filter(instance=instance, repo=repo).first()
        if made is None:
            raise NotFound(_("%(repo)s is not mounted in this instance.") % {"repo": repo})
        _check_mountable(instance)
        made.delete()
        backend_call(instance, lambda backend: backend.unmount(instance, made.target))
    return made


# The launch wizard: a data disk and mounts -----------------------------------------------------------------------


def check_launch(user, request) -> None:
    """Refuse a launch's data disk or mounts before anything is reserved (bad input: 400)."""
    from storage import disks

    if request.data_disk_gb:
        disks.price_of(request.data_disk_gb)
    for repo in parse_repos(request.mounts):
        hub_item(user, repo)


def at_launch(instance: Instance, request) -> None:
    """Inside the launch's transaction: create and attach the data disk, record the mounts. The backend gets
    them when the machine is submitted (:func:`apply`)."""
    from marketplace.hub.services import record_mount
    from storage import disks
    from storage.models import HubMount

    if request.data_disk_gb:
        name = _free_disk_name(instance)
        disks.create(instance.owner, name=name, size_gb=request.data_disk_gb, zone=instance.zone, instance=instance)
    for repo in parse_repos(request.mounts):
        item = hub_item(instance.owner, repo)
        HubMount.objects.create(instance=instance, item=item, repo=item.repo, kind=item.kind, target=item.mount_path)
        record_mount(item)


def _free_disk_name(instance: Instance) -> str:
    from storage.models import CloudDisk

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
    from storage import disks

    backend = get_backend(instance.backend_name)
    calls = [lambda: backend.mount(instance, shared_source(instance.owner), SHARED_TARGET)]
    calls += [lambda d=d: backend.attach_disk(instance, str(d.public_id)) for d in disks.attached_to(instance)]
    calls += [lambda m=m: backend.mount(instance, m.repo, m.target) for m in mounts_of(instance)]
    for call in calls:
        try:
            call()
        except TransientBackendError:
            raise
        except BackendError as exc:
            log.warning("backend %s could not attach to %s: %s", backend.name, instance.public_id, exc)


def on_released(instance: Instance) -> None:
    """Inside the release's transaction: data disks are detached and kept; hub mounts end."""
    from storage import disks

    disks.release_from(instance)
    mounts_of(instance).delete()


def shared_listing(user, limit: int = 20):
    """The top of the user's cloud storage as ``/root/shared`` shows it (the simulated view: ``Entry`` rows)."""
    from storage.models import Entry

    return list(Entry.objects.for_user(user).filter(parent=None).listing_order()[:limit])
