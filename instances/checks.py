"""System checks: something must answer what instances ask about the images they boot."""

from django.core.checks import Error, register

from core import attaching


@register()
def image_source_registered(app_configs, **kwargs):
    from .images import _source

    if _source is not None:
        return []
    return [
        Error(
            "No image source is registered: no instance could boot an image. The marketplace app registers it.",
            id="instances.E001",
        )
    ]


@register()
def storage_registered(app_configs, **kwargs):
    if attaching._attached is not None:
        return []
    return [
        Error(
            "No storage is registered: no instance could get its data disks, mounts or cloud storage. The storage "
            "app registers it.",
            id="instances.E002",
        )
    ]
