"""Querysets of the hub with the visibility rule every page and API view uses."""

from django.db import models
from django.db.models import Q

from teams.access import owned

from .choices import HubVisibility, ImageReview
from .hub import search


def _one(queryset):
    """The one row of ``queryset`` (a unique key's), or None: get() reads it with no ordering to compile."""
    try:
        return queryset.get()
    except queryset.model.DoesNotExist:
        return None


def _one_for(queryset, user, lookup: Q, action: str, everyone_sees) -> object | None:
    """The row matching ``lookup`` if ``queryset.for_user`` gives it to ``user`` for ``action``, else None. A row
    everyone may see (``everyone_sees(row)``) is read by its key alone, with no ownership clause to compile; any
    other through the rule."""
    if action == "view":
        row = _one(queryset.filter(lookup))
        if row is not None and everyone_sees(row):
            return row
    return _one(queryset.for_user(user, action).filter(lookup))


# The hub items everyone may see (``HubItemQuerySet.for_user``; ``HubItem.is_listed`` says it of one item).
LISTED_ITEMS = Q(visibility=HubVisibility.PUBLIC, taken_down_at__isnull=True)


class HubItemQuerySet(models.QuerySet):
    def for_user(self, user, action: str = "view"):
        """``view``: public items for everyone, private ones only for their owner; an item the back office took
        down only for its owner (who is told why). Any other action (``change``, ``delete``): the user's own items
        only; platform items change through the back office."""
        authenticated = getattr(user, "is_authenticated", False)
        if action != "view":
            return self.filter(owner=user) if authenticated else self.none()
        if not authenticated:
            return self.filter(LISTED_ITEMS)
        return self.filter(LISTED_ITEMS | Q(owner=user))

    def one_for(self, user, lookup: Q, action: str = "view"):
        """The item matching ``lookup`` that ``user`` may see or act on (:func:`_one_for`)."""
        return _one_for(self, user, lookup, action, lambda item: item.is_listed)

    # How many items matched when the hub search counted them before reading a page (``hub.services.search_items``
    # sets it on the queryset it returns); a clone, filtered or ordered anew, does not carry it.
    counted_matches: int | None = None

    def matching(self, query, *, many_matches: bool = False):
        """Items matching a parsed :class:`~marketplace.hub.search.HubQuery` (full text and filters)."""
        return search.apply(self, query, many_matches=many_matches)


class HubFileQuerySet(models.QuerySet):
    def for_user(self, user, action: str = "view"):
        from .models import HubItem

        return self.filter(item__in=HubItem.objects.for_user(user, action))


class HubLikeQuerySet(models.QuerySet):
    def for_user(self, user, action: str = "view"):
        """A user sees and removes their own likes only."""
        if not getattr(user, "is_authenticated", False):
            return self.none()
        return self.filter(user=user)


# The image marketplace -------------------------------------------------------------------------------------------


# The review state of the images everyone may see (``ImageQuerySet.for_user`` and ``one_for``).
EVERYONES = ImageReview.LISTED


class ImageQuerySet(models.QuerySet):
    def for_user(self, user, action: str = "view"):
        """``view``: listed images for everyone, plus the user's own and their teams' (private to the team) in any
        state, plus (for staff, who review them) images waiting for review. Any other action: the user's own
        images and their teams' as their role allows; platform images change through the back office."""
        authenticated = getattr(user, "is_authenticated", False)
        if action != "view":
            return self.filter(owned(user, action)) if authenticated else self.none()
        visible = Q(review_state=EVERYONES)
        if authenticated:
            visible |= owned(user, "view")
            if user.is_staff:
                visible |= Q(review_state=ImageReview.PENDING)
        return self.filter(visible)

    def one_for(self, user, lookup: Q, action: str = "view"):
        """The image matching ``lookup`` that ``user`` may see or act on (:func:`_one_for`)."""
        return _one_for(self, user, lookup, action, lambda image: image.review_state == EVERYONES)

    def listed(self):
        return self.filter(review_state=EVERYONES)


class ImageVariantQuerySet(models.QuerySet):
    def for_user(self, user, action: str = "view"):
        from .models import Image

        return self.filter(image__in=Image.objects.for_user(user, action))


class ImageRatingQuerySet(models.QuerySet):
    def for_user(self, user, action: str = "view"):
        """Ratings of images the user may see are public; a user changes only their own."""
        from .models import Image

        if action != "view":
            return self.filter(user=user) if getattr(user, "is_authenticated", False) else self.none()
        return self.filter(image__in=Image.objects.for_user(user, "view"))
