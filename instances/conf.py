"""Settings of the instance lifecycle, each overridable in Django settings or the environment.

Web, worker and beat processes read the same values; tests set the simulated timings to 0 through settings (or
the environment of a real worker process).
"""

from datetime import timedelta

import environ
from django.conf import settings

_env = environ.Env()


def _seconds(name: str, default: float) -> float:
    value = getattr(settings, name, None)
    return float(value) if value is not None else _env.float(name, default=default)


def release_after() -> timedelta:
    """How long a stopped instance keeps its system disk before it is released (``STOPPED_RELEASE_DAYS``)."""
    return timedelta(days=settings.STOPPED_RELEASE_DAYS)


def sim_pull_seconds() -> float:
    """How long the simulated backend takes to pull an image."""
    return _seconds("INSTANCES_SIM_PULL_SECONDS", 6)


def sim_boot_seconds() -> float:
    """How long a simulated instance takes to boot after the pull."""
    return _seconds("INSTANCES_SIM_BOOT_SECONDS", 4)


def sim_step_seconds() -> float:
    """How often the simulated quick-start training script logs a step (its loss and accuracy)."""
    return _seconds("INSTANCES_SIM_STEP_SECONDS", 5)


def stop_grace_seconds() -> float:
    """Between the checkpoint signal (SIGUSR1) and the stop."""
    return _seconds("INSTANCES_STOP_GRACE_SECONDS", 10)


def spot_notice_seconds() -> float:
    """The notice window a preempted spot instance gets to checkpoint (SPEC §6: 60 s)."""
    return _seconds("INSTANCES_SPOT_NOTICE_SECONDS", 60)


def provision_timeout_seconds() -> float:
    """A launch that is not healthy by then fails (and is never charged)."""
    return _seconds("INSTANCES_PROVISION_TIMEOUT_SECONDS", 600)


def endpoint_health_timeout_seconds() -> float:
    """An endpoint whose model server has not answered its health check by then fails (and is never charged)."""
    return _seconds("ENDPOINT_HEALTH_TIMEOUT_SECONDS", 120)
