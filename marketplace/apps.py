from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class MarketplaceConfig(AppConfig):
    name = "marketplace"
    verbose_name = _("Marketplace")

    def ready(self):
        from billing import metering

        from .images.revenue import author_shares

        # Billing pays community image authors their share of each charge; the marketplace knows who they are.
        metering.register_author_shares(author_shares)
