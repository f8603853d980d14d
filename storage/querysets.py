"""The ownership filter every storage view, API endpoint and task goes through."""

from django.db import models


class _OwnedQuerySet(models.QuerySet):
    def for_user(self, user, action: str = "view"):
        """What ``user`` may see or change: only their own. Teams (SPEC §3) share nothing here yet."""
        if not user.is_authenticated:
            return self.none()
        return self.filter(owner=user)


class EntryQuerySet(_OwnedQuerySet):
    def files(self):
        return self.filter(kind="file")

    def folders(self):
        return self.filter(kind="folder")

    def listing_order(self):
        """Folders first, then files, each by name."""
        return self.order_by("-kind", "name")


class UploadQuerySet(_OwnedQuerySet):
    def active(self):
        return self.filter(status="active")


class CloudDiskQuerySet(_OwnedQuerySet):
    def live(self):
        """Every disk that has not been deleted."""
        return self.exclude(status="deleted")


class HubMountQuerySet(models.QuerySet):
    def for_user(self, user, action: str = "view"):
        """Mounts of the user's own instances only."""
        if not user.is_authenticated:
            return self.none()
        return self.filter(instance__owner=user)
