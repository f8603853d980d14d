"""Auto-shutdown of an existing instance: change or clear when it stops itself (at a time, or after idle minutes).

Launch sets both through ``services.launch``; this is the same rule for an instance that already exists. The
housekeeping beat (``services._auto_shutdown``) reads the two fields, so nothing else needs to change.
"""

from datetime import datetime

from django.utils.translation import gettext as _

from core.errors import Conflict

from .choices import Status
from .launching import _check_shutdown
from .models import Instance

# A released (or releasing) instance never runs again: there is nothing to shut down.
FINISHED = (Status.RELEASING, Status.RELEASED)


def set_auto_shutdown(instance: Instance, at: datetime | None, idle_minutes: int | None) -> Instance:
    """Shut ``instance`` down at ``at`` and/or after ``idle_minutes`` of idle cards; None clears that setting.

    The same limits as at launch (a time in the future, 5 minutes to a week). Raises ServiceError (400) for bad
    values and Conflict (409) for a released instance, writing nothing.
    """
    _check_shutdown(at, idle_minutes)
    changed = (
        Instance.objects.filter(pk=instance.pk)
        .exclude(status__in=FINISHED)
        .update(auto_shutdown_at=at, idle_shutdown_minutes=idle_minutes)
    )
    if not changed:
        raise Conflict(_("A released instance has no auto-shutdown."))
    instance.auto_shutdown_at, instance.idle_shutdown_minutes = at, idle_minutes
    return instance
