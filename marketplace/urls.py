"""Marketplace pages. The hub lives under /hub/; the image marketplace (issue 6) will add its own paths here."""

from django.urls import path

from . import views

app_name = "marketplace"

urlpatterns = [
    path("hub/", views.hub_list, name="hub"),
    path("hub/<str:org>/<str:name>", views.hub_detail, name="hub-item"),
    path("hub/<str:org>/<str:name>/like", views.hub_like, name="hub-like"),
]
