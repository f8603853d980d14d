"""The community-image review queue, over the marketplace's own review service.

``marketplace.images.services.review_image`` checks the review role and writes the audit row for every caller (the
review page, the API, the admin and this back office); this module finds the image and passes the actor's IP.
"""

from django.utils.translation import gettext as _

from accounts.ops.audit import Actor
from core.errors import NotFound
from marketplace.images import services
from marketplace.models import Image


def pending():
    """Images waiting for review, oldest first."""
    return services.pending_review()


def pending_count() -> int:
    return pending().count()


def review(actor: Actor, *, public_id, approve: bool, reason: str = ""):
    """Approve (list it in the marketplace) or reject (with a reason the author sees) a community image."""
    image = Image.objects.filter(public_id=public_id).first()
    if image is None:
        raise NotFound(_("No such image."))
    return services.review_image(image, approve, reason, actor.user, ip=actor.ip)
