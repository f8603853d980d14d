"""System checks: mounts need the model & dataset hub to answer what may be mounted; cloud storage on S3 needs a
host that can mount the bucket (rclone and FUSE)."""

from django.core.checks import Error, Warning, register

from core import attaching

from . import s3mount


@register()
def hub_registered(app_configs, **kwargs):
    from .mounts import _hub

    if _hub is not None:
        return []
    return [Error("No model & dataset hub is registered: nothing could be mounted.", id="storage.E001")]


@register()
def machines_registered(app_configs, **kwargs):
    if attaching._machines is not None:
        return []
    return [
        Error(
            "No machines are registered: no disk or mount could be attached to an instance. The instances app "
            "registers them.",
            id="storage.E002",
        )
    ]


@register(deploy=True)
def bucket_mountable(app_configs, **kwargs):
    why = s3mount.available() if s3mount.enabled() else ""
    if not why:
        return []
    return [
        Warning(
            f"STORAGE=s3, but this host cannot mount the bucket: {why}. The storage pages and machines will answer "
            "that cloud storage is unavailable.",
            hint="Install Debian's rclone and fuse3, or set STORAGE_S3_MOUNT_ROOT empty to keep files under opaque "
            "keys that machines do not see.",
            id="storage.W001",
        )
    ]
