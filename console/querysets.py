"""Querysets with the ownership filter every view and API uses."""

from django.db import models


class ApiTokenQuerySet(models.QuerySet):
    def for_user(self, user, action: str = "view"):
        """The tokens ``user`` may see or change: their own. Anonymous users get none."""
        if not user.is_authenticated:
            return self.none()
        return self.filter(user=user)

    def active(self):
        return self.filter(revoked_at__isnull=True)
