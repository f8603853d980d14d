"""System checks: mounts need the model & dataset hub to answer what may be mounted."""

from django.core.checks import Error, register


@register()
def hub_registered(app_configs, **kwargs):
    from .mounts import _hub

    if _hub is not None:
        return []
    return [Error("No model & dataset hub is registered: nothing could be mounted.", id="storage.E001")]
