"""Querysets of the catalog. The catalog is public: every visitor may view it, nobody changes it but staff."""

from django.db import models
from django.db.models import Exists, OuterRef
from django.utils import timezone


class CatalogQuerySet(models.QuerySet):
    def for_user(self, user, action: str = "view"):
        """Everyone may view the catalog; changes go through the back office, never through user paths."""
        return self if action == "view" else self.none()


class ZoneQuerySet(CatalogQuerySet):
    def active(self):
        return self.filter(active=True)


class ChipQuerySet(CatalogQuerySet):
    def rentable(self):
        """Chips that can be rented (the comparison pages also show reference chips that cannot)."""
        return self.filter(rentable=True)

    def offered(self, at=None):
        """The chips a person may choose wherever a chip is picked (the launch wizard, the price calculator, the
        estimator, the marketplace): rentable and with a list price in force. A chip staff have not priced yet
        (the RTX 4090 as seeded) is shown in the price list as unpublished, never offered."""
        price = self.model.prices.rel.related_model  # billing's Price, reached without importing a higher layer
        in_force = price.objects.filter(chip=OuterRef("pk"), effective_from__lte=at or timezone.now())
        return self.rentable().filter(Exists(in_force))

    def with_figures(self):
        return self.prefetch_related("scaling_figures")


class NodeQuerySet(CatalogQuerySet):
    def schedulable(self):
        """Nodes that take new instances: not drained, in an active zone."""
        return self.filter(drained=False, zone__active=True)


class InstanceSpecQuerySet(CatalogQuerySet):
    def active(self):
        return self.filter(active=True)

    def with_chip(self):
        return self.select_related("chip")
