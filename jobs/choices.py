"""Choices of jobs: the backend a job asks for and the states it goes through."""

from django.db import models
from django.utils.translation import gettext_lazy as _

from catalog.choices import Backend


class JobBackend(models.TextChoices):
    """A chip family (the catalog's), ``cpu`` for a machine without cards, or ``auto``: the platform picks the
    family that is cheapest per unit of work under the job's price ceiling."""

    AUTO = "auto", _("Automatic: cheapest per unit of work")
    NPU = Backend.NPU.value, Backend.NPU.label
    MLU = Backend.MLU.value, Backend.MLU.label
    DCU = Backend.DCU.value, Backend.DCU.label
    CUDA = Backend.CUDA.value, Backend.CUDA.label
    CPU = "cpu", _("CPU only (no card)")


class State(models.TextChoices):
    """A job's state. Only ``jobs.statemachine.transition`` writes it."""

    QUEUED = "queued", _("Queued")
    STARTING = "starting", _("Starting")
    RUNNING = "running", _("Running")
    SUCCEEDED = "succeeded", _("Succeeded")
    FAILED = "failed", _("Failed")
    TIMED_OUT = "timed_out", _("Timed out")
    CANCELLED = "cancelled", _("Cancelled")


# Every legal move; a failed job with retries left goes back to the queue, and so does a spot job whose machine was
# reclaimed.
TRANSITIONS: dict[str, frozenset[str]] = {
    State.QUEUED: frozenset({State.STARTING, State.CANCELLED, State.FAILED}),
    State.STARTING: frozenset({State.RUNNING, State.FAILED, State.CANCELLED, State.QUEUED}),
    State.RUNNING: frozenset({State.SUCCEEDED, State.FAILED, State.TIMED_OUT, State.CANCELLED, State.QUEUED}),
    State.FAILED: frozenset({State.QUEUED}),
    State.SUCCEEDED: frozenset(),
    State.TIMED_OUT: frozenset(),
    State.CANCELLED: frozenset(),
}

# States with a machine on its way or running: the watch beat looks at these.
ACTIVE = frozenset({State.STARTING, State.RUNNING})
# Pages keep polling while a job is in one of these.
LIVE = ACTIVE | {State.QUEUED}
FINISHED = frozenset({State.SUCCEEDED, State.FAILED, State.TIMED_OUT, State.CANCELLED})

BADGE_COLOURS = {
    State.QUEUED: "secondary",
    State.STARTING: "info",
    State.RUNNING: "primary",
    State.SUCCEEDED: "success",
    State.FAILED: "danger",
    State.TIMED_OUT: "warning",
    State.CANCELLED: "dark",
}
