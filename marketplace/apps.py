from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class MarketplaceConfig(AppConfig):
    name = "marketplace"
    verbose_name = _("Marketplace")

    def ready(self):
        from billing import metering
        from instances import images as instance_images
        from storage import mounts

        from .hub import services as hub_services
        from .images import services as image_services
        from .images.revenue import author_shares

        # Billing pays community image authors their share of each charge; the marketplace knows who they are.
        metering.register_author_shares(author_shares)
        # Instances boot the marketplace's image variants and ask it about them through this seam.
        instance_images.register_source(image_services)
        # Instances mount the hub's models and datasets; storage keeps the mounts and asks the hub about items.
        mounts.register_hub(hub_services)
