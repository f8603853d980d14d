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


class InstanceQuerySet(models.QuerySet):
    def for_user(self, user, action: str = "view"):
        """The instances ``user`` may see or act on: their own. Teams (later) widen this, in this one place."""
        if user is None or not user.is_authenticated:
            return self.none()
        return self.filter(owner=user)

    def with_related(self):
        return self.select_related("zone", "chip", "spec", "plan", "node")

    def visible(self):
        """Released instances drop off the list (their events stay)."""
        return self.exclude(status="released")

    def released(self):
        """The released ones: the list's history tab."""
        return self.filter(status="released")

    def not_endpoints(self):
        """Instances proper: inference endpoints are instances too, but have their own pages, list and API."""
        return self.exclude(kind="endpoint")
