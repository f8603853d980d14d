"""Choices of instances: states, reasons, what happens when a prepaid term ends. Chip families and spec sizes
are the catalog's (``catalog.choices``), importable from here too."""

from django.db import models
from django.utils.translation import gettext_lazy as _

from catalog.choices import DOMESTIC_BACKENDS, SPEC_CARD_COUNTS, Backend  # noqa: F401


class Status(models.TextChoices):
    """An instance's state (SPEC §6). Only ``instances.statemachine.transition`` writes it."""

    CREATING = "creating", _("Creating")
    STARTING = "starting", _("Starting")
    RUNNING = "running", _("Running")
    STOPPING = "stopping", _("Stopping")
    STOPPED = "stopped", _("Stopped")
    PREEMPTED = "preempted", _("Preempted")
    FAILED = "failed", _("Failed")
    RELEASING = "releasing", _("Releasing")
    RELEASED = "released", _("Released")


# Every legal move. Anything else is refused with a 409 and a message saying what the instance is doing.
TRANSITIONS: dict[str, frozenset[str]] = {
    Status.CREATING: frozenset({Status.STARTING, Status.FAILED, Status.RELEASING}),
    Status.STARTING: frozenset({Status.RUNNING, Status.STOPPING, Status.FAILED, Status.RELEASING}),
    Status.RUNNING: frozenset({Status.STOPPING, Status.PREEMPTED, Status.FAILED, Status.RELEASING}),
    Status.STOPPING: frozenset({Status.STOPPED, Status.FAILED, Status.RELEASING}),
    Status.STOPPED: frozenset({Status.STARTING, Status.RELEASING}),
    Status.PREEMPTED: frozenset({Status.STARTING, Status.RELEASING}),
    Status.FAILED: frozenset({Status.STARTING, Status.RELEASING}),
    Status.RELEASING: frozenset({Status.RELEASED}),
    Status.RELEASED: frozenset(),
}

# States that hold (or are about to hold) cards and may be charged: the capacity and spending views count them.
ACTIVE = frozenset({Status.CREATING, Status.STARTING, Status.RUNNING, Status.STOPPING})
# States on the way to another: pages poll them, reconcile drives them.
TRANSITIONAL = frozenset({Status.CREATING, Status.STARTING, Status.STOPPING, Status.RELEASING})
# States that wait for the user: reconcile leaves them alone.
SETTLED = frozenset({Status.RUNNING, Status.STOPPED, Status.PREEMPTED, Status.FAILED})
# Nothing ever happens again.
TERMINAL = frozenset({Status.RELEASED})
# Live status: pages keep polling while an instance is in one of these (a running spot instance can be preempted).
LIVE = ACTIVE | {Status.RELEASING}
# The hourly price shows in these: the instance is billed now or about to be. Elsewhere nothing is billed per hour.
PRICED = frozenset({Status.CREATING, Status.STARTING, Status.RUNNING})
# The release countdown runs in these.
RESTING = frozenset({Status.STOPPED, Status.PREEMPTED, Status.FAILED})

BADGE_COLOURS = {
    Status.CREATING: "info",
    Status.STARTING: "info",
    Status.RUNNING: "success",
    Status.STOPPING: "warning",
    Status.STOPPED: "secondary",
    Status.PREEMPTED: "warning",
    Status.FAILED: "danger",
    Status.RELEASING: "dark",
    Status.RELEASED: "light",
}


class Wanted(models.TextChoices):
    """The state the user asked for; reconcile drives the instance towards it."""

    RUNNING = "running", _("running")
    STOPPED = "stopped", _("stopped")
    RELEASED = "released", _("released")


class TermEnd(models.TextChoices):
    """What happens when a prepaid daily/monthly term ends (the user's choice)."""

    CONTINUE = "continue", _("Continue pay-as-you-go")
    STOP = "stop", _("Stop the instance")


class Reason(models.TextChoices):
    """Why a transition happened, shown on the timeline. ``InstanceEvent.detail`` adds the particulars."""

    LAUNCHED = "launched", _("Launched")
    SUBMITTED = "submitted", _("Submitted to the compute backend")
    HEALTHY = "healthy", _("Booted and healthy")
    STOP_REQUESTED = "stop_requested", _("Stop requested")
    STOPPED = "stopped", _("Stopped after the checkpoint grace period")
    START_REQUESTED = "start_requested", _("Start requested")
    RELEASE_REQUESTED = "release_requested", _("Release requested")
    RELEASED = "released", _("Released; the system disk was deleted")
    SUBMIT_FAILED = "submit_failed", _("The backend refused the instance")
    NEVER_HEALTHY = "never_healthy", _("The instance never became healthy")
    NODE_LOST = "node_lost", _("The node running the instance failed")
    PREEMPTED = "preempted", _("Spot capacity reclaimed")
    ARREARS = "arrears", _("Stopped for arrears")
    SPENDING_CAP = "spending_cap", _("Stopped at the monthly spending cap")
    MEMBER_BUDGET = "member_budget", _("Stopped at the member's monthly budget in the team")
    AUTO_SHUTDOWN_TIME = "auto_shutdown_time", _("Auto-shutdown at the scheduled time")
    AUTO_SHUTDOWN_IDLE = "auto_shutdown_idle", _("Auto-shutdown after idle minutes")
    TERM_ENDED = "term_ended", _("The prepaid term ended")
    TERM_CONTINUED = "term_continued", _("The prepaid term ended; continuing pay-as-you-go")
    TERM_RENEWED = "term_renewed", _("A prepaid term was paid")
    AUTO_RELEASE = "auto_release", _("Released automatically after the stopped period")
    RELEASE_REMINDER = "release_reminder", _("Release reminder")
    MOVED = "moved", _("Moved to another node; its disks follow")
    NO_CARD_MODE = "no_card_mode", _("Started in no-card mode (CPU only)")
    RECONCILED = "reconciled", _("Repaired by reconcile")
    SECRET_MISSING = "secret_missing", _("Booted without a secret that no longer exists")
    CHANGED_OUTSIDE = "changed_outside", _("Its cluster job was changed outside the console, which ended it")


# Reminders before the automatic release of a stopped instance, in days before it.
RELEASE_REMINDER_DAYS = (3, 1)
