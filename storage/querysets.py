"""The ownership filter every storage view, API endpoint and task goes through."""

from django.db import models

from teams.access import owned


class _OwnedQuerySet(models.QuerySet):
    def for_user(self, user, action: str = "view"):
        """What the account ``user`` owns. Files belong to one account: the person's own folder, or a team's (the
        views pass the team's account after checking the member's role)."""
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


class CloudDiskQuerySet(models.QuerySet):
    def for_user(self, user, action: str = "view"):
        """The disks ``user`` may ``action``: their own, and their teams' as their role allows (``teams.access``)."""
        if not user.is_authenticated:
            return self.none()
        return self.filter(owned(user, action))

    def live(self):
        """Every disk that has not been deleted."""
        return self.exclude(status="deleted")


class HubMountQuerySet(models.QuerySet):
    def for_user(self, user, action: str = "view"):
        """Mounts of the user's own instances only."""
        if not user.is_authenticated:
            return self.none()
        return self.filter(instance__owner=user)
