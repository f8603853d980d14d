"""The public catalog pages under /catalog/: the price list, the chip comparison and the training estimator.

Chips, zones and prices are the catalog app's data, but that app is the lowest layer (``.importlinter``) and these
pages price what they show with billing's quote, so their views are billing's (``billing.views.pricing`` and
``billing.views.catalog``, with ``billing.comparison`` and ``billing.estimator``) and this conf, at the top beside
``config/urls.py``, gathers them under the catalog's prefix.
"""

from django.urls import path
from django.views.generic import RedirectView

from billing.views import catalog as catalog_views
from billing.views import pricing as billing_views

app_name = "catalog"

urlpatterns = [
    # The catalog's own address opens its first page, as every other prefix opens a page of its own.
    path("", RedirectView.as_view(pattern_name="catalog:pricing"), name="index"),
    path("pricing/", billing_views.pricing, name="pricing"),
    path("chips/", catalog_views.chips, name="chips"),
    path("estimator/", catalog_views.estimator_page, name="estimator"),
]
