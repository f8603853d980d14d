"""The community-image review queue, over the marketplace's own review service.

Community images are the marketplace's (``marketplace.images``); its ``services.review_image(image, approve,
reason, by)`` lists or rejects an image and ``pending_review()`` is the queue. This module looks them up when
called (the marketplace is built beside the back office) and wraps each review with the role check and the audit
row; without them the reviews page says the queue is not available.
"""

from importlib import import_module

from django.db import transaction
from django.utils.translation import gettext as _

from console.errors import NotFound, ServiceError

from . import roles
from .audit import Actor, record
from .choices import AuditAction


def _services():
    try:
        module = import_module("marketplace.images.services")
    except ImportError:
        return None
    return module if hasattr(module, "review_image") else None


def _model():
    try:
        return import_module("marketplace.models").Image
    except (ImportError, AttributeError):
        return None


def available() -> bool:
    return _services() is not None and _model() is not None


def pending():
    """Images waiting for review, oldest first (the marketplace's own queryset when it offers one)."""
    svc, model = _services(), _model()
    if svc is None or model is None:
        return []
    if hasattr(svc, "pending_review"):
        return svc.pending_review()
    return model.objects.filter(review_state="pending").order_by("pk")


def pending_count() -> int | None:
    if not available():
        return None
    queue = pending()
    return queue.count() if hasattr(queue, "count") else len(queue)


def review(actor: Actor, *, public_id, approve: bool, reason: str = ""):
    """Approve (list it in the marketplace) or reject (with a reason the author sees) a community image."""
    roles.require(actor.user, roles.REVIEW_IMAGE)
    svc, model = _services(), _model()
    if svc is None or model is None:
        raise ServiceError(_("Community image review is not available yet."), code="unavailable")
    image = model.objects.filter(public_id=public_id).first()
    if image is None:
        raise NotFound(_("No such image."))
    reason = (reason or "").strip()
    if not approve and not reason:
        raise ServiceError(_("Give the author a reason for the rejection."), code="reason_required")
    before = {"review_state": getattr(image, "review_state", "")}
    with transaction.atomic():
        reviewed = svc.review_image(image, approve, reason, actor.user) or image
        after = {"review_state": getattr(reviewed, "review_state", ""), "owner": getattr(reviewed.owner, "email", "")}
        action = AuditAction.IMAGE_APPROVED if approve else AuditAction.IMAGE_REJECTED
        record(actor, action, reviewed, reason=reason, before=before, after=after)
    return reviewed
