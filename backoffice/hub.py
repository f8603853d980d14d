"""Hub moderation in the back office: taking a published repository down and restoring it, audited.

Apart from ``services`` because the instances' admin imports that module, and the hub sits above instances.
"""

from django.db import transaction
from django.utils.translation import gettext as _

from accounts.ops import roles
from accounts.ops.audit import Actor, record
from accounts.ops.choices import AuditAction
from core.errors import NotFound
from marketplace.hub import repos
from marketplace.models import HubItem

from .services import _reason

# --- Hub moderation -------------------------------------------------------------------------------------------------


def _hub_item(public_id):
    item = HubItem.objects.filter(public_id=public_id).first()
    if item is None:
        raise NotFound(_("No such repository."))
    return item


def take_down_repo(actor: Actor, public_id, *, reason: str):
    """Take a published repository down (its owner sees why; everyone else gets "not found"), audited."""
    roles.require(actor.user, roles.REVIEW_IMAGE)
    reason = _reason(reason)
    with transaction.atomic():
        item = repos.take_down(_hub_item(public_id), reason)
        record(actor, AuditAction.HUB_REPO_TAKEN_DOWN, item, reason=reason, after={"repo": item.repo})
    return item


def restore_repo(actor: Actor, public_id, *, reason: str = ""):
    roles.require(actor.user, roles.REVIEW_IMAGE)
    with transaction.atomic():
        item = repos.restore(_hub_item(public_id))
        record(
            actor,
            AuditAction.HUB_REPO_RESTORED,
            item,
            reason=_reason(reason, required=False),
            after={"repo": item.repo},
        )
    return item
