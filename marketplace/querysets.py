"""Querysets of the hub with the visibility rule every page and API view uses."""

from django.db import models
from django.db.models import Q

from .choices import HubVisibility


class HubItemQuerySet(models.QuerySet):
    def for_user(self, user, action: str = "view"):
        """``view``: public items for everyone, private ones only for their owner. Any other action (``change``,
        ``delete``): the user's own items only; platform items change through the back office."""
        authenticated = getattr(user, "is_authenticated", False)
        if action != "view":
            return self.filter(owner=user) if authenticated else self.none()
        if not authenticated:
            return self.filter(visibility=HubVisibility.PUBLIC)
        return self.filter(Q(visibility=HubVisibility.PUBLIC) | Q(owner=user))

    def matching(self, query):
        """Items matching a parsed :class:`~marketplace.hub.search.HubQuery` (full text and filters)."""
        from .hub import search

        return search.apply(self, query)


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
