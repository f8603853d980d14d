"""Querysets of the catalog. The catalog is public: every visitor may view it, nobody changes it but staff."""

from django.db import models


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
