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


class SSHKeyQuerySet(models.QuerySet):
    def for_user(self, user, action: str = "view"):
        """The SSH keys ``user`` may see or delete: their own. Anonymous users get none."""
        if not getattr(user, "is_authenticated", False):
            return self.none()
        return self.filter(user=user)


class EnterpriseVerificationQuerySet(models.QuerySet):
    def for_user(self, user, action: str = "view"):
        """A user's own applications (staff review the queue through ``accounts.ops``, never through this)."""
        if not getattr(user, "is_authenticated", False):
            return self.none()
        return self.filter(user=user)

    def pending(self):
        return self.filter(status="pending")
