"""Querysets of instances and of their owners' secrets."""

from datetime import timedelta

from django.db import models
from django.db.models import Q
from django.utils import timezone

from teams.access import owned

from . import conf
from .choices import LIVE, Status


class InstanceQuerySet(models.QuerySet):
    def for_user(self, user, action: str = "view"):
        """The instances ``user`` may see (``view``) or act on (any other action): their own, and their teams' as
        their role allows."""
        if user is None or not user.is_authenticated:
            return self.none()
        return self.filter(owned(user, action))

    def with_related(self):
        # Not the daily stop and start (a reverse one-to-one that only the instance page shows): PostgreSQL's planner
        # weighs every order of a list's joins, and one relation more tripled its time.
        return self.select_related("zone", "chip", "spec", "plan", "node")

    def reconciled(self):
        """The instances reconcile looks at: the live ones, and reclaimed spot ones whose cards are still held or whose
        machine goes down after the notice window (their backend may still run it)."""
        watch = timezone.now() - timedelta(seconds=conf.spot_notice_seconds() + 600)
        return self.filter(
            Q(status__in=[*LIVE])
            | Q(status=Status.PREEMPTED, reserved_cards__gt=0)
            | Q(status=Status.PREEMPTED, stopped_at__gte=watch)
        )

    def visible(self):
        """Released instances drop off the list (their events stay)."""
        return self.exclude(status="released")

    def released(self):
        """The released ones: the list's history tab."""
        return self.filter(status="released")

    def not_endpoints(self):
        """Instances proper: inference endpoints are instances too, but have their own pages, list and API."""
        return self.exclude(kind="endpoint")


class SecretQuerySet(models.QuerySet):
    def for_user(self, user, action: str = "view"):
        """A user's own secrets; anonymous users get none. Nobody else's, staff included (the admin shows names)."""
        if user is None or not user.is_authenticated:
            return self.none()
        return self.filter(owner=user)


class WaitingLaunchQuerySet(models.QuerySet):
    def for_user(self, user, action: str = "view"):
        """The waiting launches ``user`` may see (``view``) or act on: their own, and their teams' as their role
        allows."""
        if user is None or not user.is_authenticated:
            return self.none()
        return self.filter(owned(user, action))
