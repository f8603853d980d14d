"""What storage attaches to instances: data disks, hub mounts and the owner's cloud storage at ``/root/shared``.

Registered with ``core.attaching`` when Django starts (``StorageConfig.ready``): instances import nothing of storage
and call these through that seam (at launch, after every start, at release, for the instance page's panel), as
storage reaches instances only through what they register there (``instances.machines``).
"""

import errno
from pathlib import Path

from django.contrib.auth import get_user_model

from . import disks, mounts, s3mount, tree
from .models import CloudDisk, Entry


def check_launch(user, request) -> None:
    """Refuse a launch's data disk or mounts before anything is reserved (bad input: 400)."""
    if request.data_disk_gb:
        disks.price_of(request.data_disk_gb)
    mounts.check_launch(user, request.mounts)


def at_launch(instance, request) -> None:
    """Inside the launch's transaction: create and attach the data disk, record the mounts."""
    if request.data_disk_gb:
        name = _free_disk_name(instance)
        disks.create(instance.owner, name=name, size_gb=request.data_disk_gb, zone=instance.zone, instance=instance)
    mounts.at_launch(instance, request.mounts)


def _free_disk_name(instance) -> str:
    base = f"{instance.name[:55]}-data"
    taken = set(
        CloudDisk.objects.live().filter(owner=instance.owner, name__startswith=base).values_list("name", flat=True)
    )
    if base not in taken:
        return base
    return next(f"{base}-{n}" for n in range(2, len(taken) + 3) if f"{base}-{n}" not in taken)


def calls(instance, backend) -> list:
    """The backend calls that hand it the instance's attached data disks and hub mounts (each a no-op repeated)."""
    made = [
        lambda d=d: backend.attach_disk(instance, str(d.public_id), d.size_gb, name=d.name)
        for d in disks.attached_to(instance)
    ]
    return made + [lambda m=m: backend.mount(instance, m.repo, m.target) for m in mounts.mounts_of(instance)]


def on_released(instance) -> None:
    """Inside the release's transaction: data disks are detached and kept; hub mounts end."""
    disks.release_from(instance)
    mounts.on_released(instance)


def shared_folder(account_public_id: str) -> Path | None:
    """Where the account's cloud storage is on this host with ``STORAGE=local`` (the very files the console lists
    and serves); None on S3 storage."""
    return tree.location() / account_public_id if tree.enabled() else None


def mounted_shared(account_public_id: str) -> Path | None:
    """The account's cloud storage mounted on this host, ready to bind, where storage mounts it itself (the bucket's
    prefix through rclone on S3); None where the backend makes the folder's size-limited image (local storage)."""
    if not s3mount.enabled():
        return None
    owner = get_user_model().objects.filter(public_id=account_public_id).first()
    if owner is None:
        raise OSError(errno.ENOENT, f"no account {account_public_id}")
    root = tree.root_of(owner)
    s3mount.ready(root, tree.sandbox_uid(owner))
    return root


def shared_listing(user, limit: int = 20) -> list:
    """The top of the user's cloud storage as ``/root/shared`` shows it."""
    if not user.is_authenticated:  # as Entry.objects.for_user
        return []
    tree.sync(user)  # what the account's machines wrote there
    return list(Entry.objects.filter(owner_id=user.pk, parent=None).listing_order()[:limit])


def panel_context(instance) -> dict:
    """The instance page's disks-and-mounts panel."""
    from .views.disks import panel_context as context  # the pages sit above the services this module is part of

    return context(instance)
