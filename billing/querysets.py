"""Querysets for prices, plans and subsidy programmes (public data: anyone may view, staff change)."""

from django.db import models
from django.db.models import Q


class PublicQuerySet(models.QuerySet):
    def for_user(self, user, action: str = "view"):
        """Prices and programmes are published to everyone; changes go through the back office only."""
        return self if action == "view" else self.none()


class PriceQuerySet(PublicQuerySet):
    def effective_at(self, at):
        """Rows that had started by ``at``, newest first per chip: the first row per chip is the price in force."""
        return self.filter(effective_from__lte=at).order_by("chip_id", "-effective_from")


class PlanQuerySet(PublicQuerySet):
    def active(self):
        return self.filter(active=True)


class SubsidyProgrammeQuerySet(PublicQuerySet):
    def running_at(self, at):
        """Programmes switched on whose dates include ``at``."""
        return self.filter(Q(ends_at__isnull=True) | Q(ends_at__gt=at), active=True, starts_at__lte=at)


class SubsidyUsageQuerySet(models.QuerySet):
    def for_user(self, user, action: str = "view"):
        if not getattr(user, "is_authenticated", False):
            return self.none()
        return self.filter(user=user)
