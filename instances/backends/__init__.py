"""Compute backends behind one small interface. A zone's nodes name their backend (``Node.backend_name``)."""

from django.utils.module_loading import import_string

from .base import Backend, BackendError, BackendStatus, JupyterServer, MetricPoint, Phase, TransientBackendError

REGISTRY = {
    "local": "instances.backends.local.LocalBackend",
    "simulated": "instances.backends.simulated.SimulatedBackend",
    "slurm": "instances.backends.slurm.SlurmBackend",
}

_instances: dict[str, Backend] = {}


def get_backend(name: str) -> Backend:
    """The backend registered as ``name`` (one shared instance per process)."""
    if name not in _instances:
        if name not in REGISTRY:
            raise BackendError(f"No compute backend named {name!r}.")
        _instances[name] = import_string(REGISTRY[name])()
    return _instances[name]


__all__ = [
    "Backend",
    "BackendError",
    "BackendStatus",
    "JupyterServer",
    "MetricPoint",
    "Phase",
    "TransientBackendError",
    "get_backend",
]
