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


class OwnedQuerySet(models.QuerySet):
    """Rows that belong to one user: the owner may view; nobody changes them through a view."""

    def for_user(self, user, action: str = "view"):
        if not getattr(user, "is_authenticated", False) or action != "view":
            return self.none()
        return self.filter(user=user)


class VoucherQuerySet(models.QuerySet):
    def usable(self, at):
        """Vouchers that may be spent at ``at``: :func:`billing.rules.voucher_usable` read by the database (a
        balance left on the voucher's account, which has not expired)."""
        return self.filter(account__balance__gt=0, account__expires_at__gt=at)


class AppendOnlyQuerySet(models.QuerySet):
    """Ledger rows are inserted, never updated or deleted in bulk either."""

    def update(self, **kwargs):
        from .models import AppendOnlyError

        raise AppendOnlyError(f"{self.model.__name__} rows are append-only.")

    def delete(self):
        from .models import AppendOnlyError

        raise AppendOnlyError(f"{self.model.__name__} rows are append-only.")


class LedgerTransactionQuerySet(AppendOnlyQuerySet, OwnedQuerySet):
    def in_range(self, since=None, until=None):
        qs = self
        if since is not None:
            qs = qs.filter(created_at__gte=since)
        if until is not None:
            qs = qs.filter(created_at__lt=until)
        return qs


class UsageSessionQuerySet(OwnedQuerySet):
    def open(self):
        return self.filter(ended_at__isnull=True)


class TopUpQuerySet(OwnedQuerySet):
    pass


class NotificationQuerySet(models.QuerySet):
    def for_user(self, user, action: str = "view"):
        if not getattr(user, "is_authenticated", False):
            return self.none()
        return self.filter(user=user)

    def unread(self):
        return self.filter(read_at__isnull=True)
