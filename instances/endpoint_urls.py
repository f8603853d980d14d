"""Endpoint pages (/endpoints/…) and the OpenAI-compatible proxy (/v1/…)."""

from django.urls import path, re_path

from . import endpoint_proxy, endpoint_views

app_name = "endpoints"

urlpatterns = [
    path("endpoints/", endpoint_views.endpoint_list, name="list"),
    path("endpoints/deploy/<str:slug>/", endpoint_views.deploy, name="deploy"),
    path("endpoints/<str:public_id>/", endpoint_views.detail, name="detail"),
    path("endpoints/<str:public_id>/chart/", endpoint_views.chart, name="chart"),
    path("endpoints/<str:public_id>/keys/", endpoint_views.create_key, name="create-key"),
    path("endpoints/<str:public_id>/keys/<str:key_id>/revoke/", endpoint_views.revoke_key, name="revoke-key"),
    path("endpoints/<str:public_id>/stop/", endpoint_views.stop, name="stop"),
    path("endpoints/<str:public_id>/start/", endpoint_views.start, name="start"),
    path("endpoints/<str:public_id>/release/", endpoint_views.release, name="release"),
    path("endpoints/<str:public_id>/scale-to-zero/", endpoint_views.scale_to_zero, name="scale-to-zero"),
    re_path(r"^v1/(?P<path>[a-z/]+)$", endpoint_proxy.v1, name="v1"),
]
