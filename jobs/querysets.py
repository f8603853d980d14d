"""Querysets of jobs."""

from django.db import models

from teams.access import owned


class JobQuerySet(models.QuerySet):
    def for_user(self, user, action: str = "view"):
        """The jobs ``user`` may see (``view``) or act on (any other action): their own, and their teams' as their
        role allows."""
        if user is None or not user.is_authenticated:
            return self.none()
        return self.filter(owned(user, action))

    def with_related(self):
        return self.select_related("chip", "instance")
