"""Hub mounts: a model or data set of the hub, read-only in an instance at ``HubItem.mount_path``
(``/root/public/<repo>`` for models, ``/root/datasets/<repo>`` for data sets). The only writer of ``HubMount``.

A mount is a row plus a call to the backend's ``mount(instance, source, target)`` — metadata, never a copy — so it
appears within seconds. On a running instance the backend gets it at once and a refusal undoes the row
(``instances.machines.backend_call``); on one that is starting or resting, its next start hands every mount over
again (``instances.attachments.apply``). A launch records its mounts in its own transaction (:func:`at_launch`).
"""

import logging
import re
from typing import Protocol

from django.db import IntegrityError, transaction
from django.utils.translation import gettext as _

from core.attaching import machines
from core.errors import Conflict, NotFound, ServiceError

from .models import HubMount

log = logging.getLogger(__name__)

MAX_MOUNTS = 16


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


class Hub(Protocol):
    """What mounts ask the model & dataset hub, which the marketplace keeps and registers when Django starts."""

    def get_item(self, user, repo: str): ...
    def record_mount(self, item) -> None: ...


_hub: Hub | None = None


def register_hub(hub: Hub) -> None:
    global _hub
    _hub = hub


def hub() -> Hub:
    """The registered hub; none means the marketplace is not installed, and nothing can be mounted."""
    if _hub is None:
        raise RuntimeError("no model & dataset hub is registered (the marketplace app registers it when installed)")
    return _hub


def hub_item(user, repo: str):
    """An item ``user`` may see (public, or their own private one); bad input (400) otherwise."""
    try:
        item = hub().get_item(user, repo)
    except NotFound as exc:
        raise ServiceError(exc.message, code="unknown_repo") from exc
    if getattr(item, "taken_down_at", None) is not None:  # its owner still sees it, but nothing mounts it
        raise ServiceError(
            _("%(repo)s was taken down by the operator and cannot be mounted.") % {"repo": repo}, code="taken_down"
        )
    return item


def mounts_of(instance):  # or its id
    return HubMount.objects.filter(instance=instance).order_by("target")


def _check_mountable(instance) -> None:
    if not machines().may_attach(instance):
        raise Conflict(
            _("Instance “%(name)s” is %(status)s: mounts change on running, starting or stopped instances.")
            % {"name": instance.name, "status": instance.get_status_display().lower()},
            code="invalid_transition",
        )


def _record(instance, item) -> HubMount:
    """The mount's row, and one more mount on the item's counter (the hub's "most mounted" order)."""
    made = HubMount.objects.create(instance=instance, repo=item.repo, kind=item.kind, target=item.mount_path)
    hub().record_mount(item)
    return made


def mount(user, instance, repo: str) -> HubMount:
    """Mount the hub item ``repo`` read-only into ``instance`` (the caller's): metadata handed to the backend."""
    item = hub_item(user, repo)
    _check_mountable(instance)
    with transaction.atomic():
        instance = machines().lock(instance.pk)
        _check_mountable(instance)
        if HubMount.objects.filter(instance=instance).count() >= MAX_MOUNTS:
            raise ServiceError(
                _("An instance mounts at most %(max)s models and datasets.") % {"max": MAX_MOUNTS},
                code="too_many_mounts",
            )
        try:
            with transaction.atomic():
                made = _record(instance, item)
        except IntegrityError as exc:
            raise Conflict(
                _("%(repo)s is already mounted at %(path)s.") % {"repo": item.repo, "path": item.mount_path},
                code="already_mounted",
            ) from exc
        machines().backend_call(instance, lambda backend: backend.mount(instance, item.repo, item.mount_path))
    return made


def unmount(user, instance, repo: str) -> HubMount:
    """Unmount ``repo`` from ``instance``; a repo that is not mounted there is a 404."""
    with transaction.atomic():
        instance = machines().lock(instance.pk)
        made = HubMount.objects.filter(instance=instance, repo=repo).first()
        if made is None:
            raise NotFound(_("%(repo)s is not mounted in this instance.") % {"repo": repo})
        _check_mountable(instance)
        made.delete()
        machines().backend_call(instance, lambda backend: backend.unmount(instance, made.target))
    return made


def hand_over_again(repo: str) -> None:
    """Hand each machine that mounts ``repo`` its mount again, as the hub lays the repository out now (taken down:
    nothing). A backend that binds the hub's own folder shows it already; one that copies what it mounts (Slurm)
    drops the files it copied. A machine that cannot take it is logged, and the others still get it; its next
    start hands the mount over anyway."""
    for made in HubMount.objects.filter(repo=repo).only("instance_id", "repo", "target"):
        try:
            with transaction.atomic():
                instance = machines().lock(made.instance_id)
                if machines().may_attach(instance):
                    target = made.target
                    machines().backend_call(instance, lambda backend, i=instance, t=target: backend.mount(i, repo, t))
        except Exception:  # noqa: BLE001 - one machine's trouble must not keep the files in the others
            log.exception("mounting %s again in instance %s", repo, made.instance_id)


def check_launch(user, repos) -> None:
    """Refuse a launch's mounts before anything is reserved: a bad list or an item ``user`` may not see (400)."""
    for repo in parse_repos(repos):
        hub_item(user, repo)


def at_launch(instance, repos) -> None:
    """Inside the launch's transaction: record the mounts. The backend gets them when the machine is submitted."""
    for repo in parse_repos(repos):
        _record(instance, hub_item(instance.owner, repo))


def on_released(instance) -> None:
    """Inside the release's transaction: the instance's mounts end."""
    mounts_of(instance).delete()
