"""Instances as the machines storage attaches data disks and hub mounts to: the ``Machines`` side of
``core.attaching``, registered when Django starts (``InstancesConfig.ready``). Storage imports nothing of instances
and reaches these through that seam."""

import logging
from pathlib import Path

from django.utils.translation import gettext as _

from core.errors import ServiceError

from .attachments import MOUNTABLE, shared_target
from .backends import BackendError, TransientBackendError, get_backend, local_volumes
from .choices import Status
from .lifecycle import get_instance
from .models import Instance

# The Machines protocol: the functions below, and where an instance mounts its owner's cloud storage.
__all__ = [
    "attachable",
    "backend_call",
    "by_pk",
    "ensure_volume",
    "erase_disk",
    "get",
    "is_launching",
    "is_running",
    "is_simulated",
    "lock",
    "may_attach",
    "shared_target",
    "unmount_volumes",
    "volume_ready",
]

# Where an attach or detach reaches the backend at once: a running instance gets a hot-plug (a refusal undoes the
# change); one that is starting or resting has its layout updated where the backend keeps one, and its start hands
# every attached disk and mount over again (``instances.attachments.apply``).
HOT = {Status.RUNNING}
LAUNCHING = {Status.CREATING, Status.STARTING}

log = logging.getLogger(__name__)


def get(user, public_id, action: str = "view") -> Instance:
    """The instance ``user`` may ``action`` (someone else's and a missing one: the same 404)."""
    return get_instance(user, public_id, action)


def by_pk(pk: int) -> Instance:
    return Instance.objects.get(pk=pk)


def lock(pk: int) -> Instance:
    """The instance, its row locked for the rest of the transaction (PostgreSQL; SQLite serialises writers)."""
    return Instance.objects.select_for_update().get(pk=pk)


def attachable(owner_id: int, zone_ids, *, user=None):
    """The account's instances (not endpoints) in ``zone_ids`` that may take a disk now, by name; with ``user``,
    only those the user may change."""
    instances = Instance.objects.for_user(user, "change") if user is not None else Instance.objects.all()
    instances = instances.filter(owner_id=owner_id, zone_id__in=zone_ids, status__in=MOUNTABLE).not_endpoints()
    return instances.order_by("name")


def may_attach(instance: Instance) -> bool:
    """Disks and mounts change on instances that are up, on their way up, or resting."""
    return instance.status in MOUNTABLE


def is_running(instance: Instance) -> bool:
    return instance.status in HOT


def is_launching(instance: Instance) -> bool:
    """Created or starting and not billed yet: a disk made with it must fit in the wallet together with it."""
    return instance.status in LAUNCHING


def backend_call(instance: Instance, call, what: str = "mount") -> None:
    """Run ``call(backend)`` for a mount or a data disk. On a running instance a refusal undoes the whole change
    (the caller's transaction); elsewhere the start applies it anyway (``instances.attachments.apply``), so a
    backend that has no machine yet is fine and the refusal is only logged."""
    try:
        call(get_backend(instance.backend_name))
    except BackendError as exc:
        if instance.status == Status.RUNNING:
            raise ServiceError(
                _("The instance's machine refused the change: %(reason)s") % {"reason": exc}, code="backend_refused"
            ) from exc
        log.info("%s on %s deferred to its start: %s", what, instance.public_id, exc)


def is_simulated(instance: Instance) -> bool:
    return get_backend(instance.backend_name).simulated


def erase_disk(backend_name: str, disk_id: str) -> None:
    """A deleted disk's bytes go from the backend ``backend_name``."""
    get_backend(backend_name).delete_disk(disk_id)


def volume_ready(folder: Path) -> bool:
    """The host's size-limited volume at ``folder`` mounted (``local_volumes.ready``)."""
    try:
        return local_volumes.ready(folder)
    except TransientBackendError as exc:
        raise OSError(f"the volume at {folder} cannot be mounted now: {exc}") from exc


def ensure_volume(folder: Path, uid: int, size_gb: float) -> int:
    """A size-limited volume at ``folder`` made or grown (``local_volumes.ensure``)."""
    return local_volumes.ensure(folder, uid, size_gb)


def unmount_volumes(root: Path, *more: Path) -> None:
    """Every volume under ``root`` (and ``more``) unmounted (``local_volumes.unmount_all``)."""
    local_volumes.unmount_all(root, *more)
