from django.apps import AppConfig
from django.db.models.signals import post_delete, post_save
from django.utils.translation import gettext_lazy as _

from core import visitor_cache
from instances import images as instance_images


class MarketplaceConfig(AppConfig):
    name = "marketplace"
    verbose_name = _("Marketplace")

    def ready(self):
        from billing import metering
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
        _connect_visitor_pages()


def _connect_visitor_pages() -> None:
    """A saved or deleted image (or variant of one) or hub item is a new generation of the visitor's pages that show
    them."""
    from .images import services as image_services
    from .models import HubItem, Image, ImageVariant

    pages = ((Image, image_services.VISITOR_PAGES), (ImageVariant, image_services.VISITOR_PAGES), (HubItem, "hub-list"))
    for model, page in pages:

        def changed(sender, page=page, **kwargs):
            visitor_cache.bump(page)

        name = f"visitor_page_{page}_{model._meta.model_name}"
        post_save.connect(changed, sender=model, weak=False, dispatch_uid=f"{name}_saved")
        post_delete.connect(changed, sender=model, weak=False, dispatch_uid=f"{name}_deleted")
