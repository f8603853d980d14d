"""The one function that changes an instance's state, and the events it writes."""

from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from core.errors import Conflict

from .choices import TRANSITIONS, Status
from .models import Instance, InstanceEvent

# What the user asked for, by the state it leads to: the 409 message names it.
ACTIONS = {
    Status.STARTING: gettext_lazy("start"),
    Status.STOPPING: gettext_lazy("stop"),
    Status.RELEASING: gettext_lazy("release"),
}


def check_move(instance: Instance, to: str) -> None:
    """Raise Conflict (409) with a message when ``instance`` may not move to ``to``."""
    if to not in TRANSITIONS[instance.status]:
        action = ACTIONS.get(to)
        if action is not None:
            message = _("Instance “%(name)s” is %(status)s: you cannot %(action)s it now.")
        else:
            message = _("Instance “%(name)s” is %(status)s and cannot become %(target)s.")
        raise Conflict(
            message
            % {
                "name": instance.name,
                "status": Status(instance.status).label.lower(),
                "action": str(action),
                "target": Status(to).label.lower(),
            },
            code="invalid_transition",
        )


def transition(instance: Instance, to: str, *, reason: str, detail: str = "", at=None, data=None, **changes):
    """Move ``instance`` to ``to`` if the move table allows it and nobody moved it meanwhile (compare-and-set on
    the old status), write the event, and apply ``changes`` to the same row. Raises Conflict otherwise."""
    check_move(instance, to)
    old = instance.status
    at = at or timezone.now()
    fields = {"status": to, "status_reason": reason, "status_detail": detail[:255], **changes}
    with transaction.atomic():
        if not Instance.objects.filter(pk=instance.pk, status=old).update(updated_at=timezone.now(), **fields):
            instance.refresh_from_db(fields=["status"])
            check_move(instance, to)  # explains the state it is in now
            raise Conflict(_("The instance changed meanwhile; try again."), code="concurrent_change")
        InstanceEvent.objects.create(
            instance=instance, old=old, new=to, reason=reason, detail=detail[:255], data=data or {}, at=at
        )
    for name, value in fields.items():
        setattr(instance, name, value)
    return instance


def note(instance: Instance, reason: str, *, detail: str = "", at=None, data=None) -> InstanceEvent:
    """An event that is not a transition (old = new): a reminder, a move to another node, a renewal."""
    return InstanceEvent.objects.create(
        instance=instance,
        old=instance.status,
        new=instance.status,
        reason=reason,
        detail=detail[:255],
        data=data or {},
        at=at or timezone.now(),
    )
