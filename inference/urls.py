"""Endpoint pages (/endpoints/…) and the OpenAI-compatible proxy (/v1/…)."""

from django.urls import path, re_path

from . import proxy, views

app_name = "endpoints"

urlpatterns = [
    path("endpoints/", views.endpoint_list, name="list"),
    path("endpoints/deploy/<str:slug>/", views.deploy, name="deploy"),
    path("endpoints/<str:public_id>/", views.detail, name="detail"),
    path("endpoints/<str:public_id>/chart/", views.chart, name="chart"),
    path("endpoints/<str:public_id>/keys/", views.create_key, name="create-key"),
    path("endpoints/<str:public_id>/keys/<str:key_id>/revoke/", views.revoke_key, name="revoke-key"),
    path("endpoints/<str:public_id>/stop/", views.stop, name="stop"),
    path("endpoints/<str:public_id>/start/", views.start, name="start"),
    path("endpoints/<str:public_id>/release/", views.release, name="release"),
    path("endpoints/<str:public_id>/scale-to-zero/", views.scale_to_zero, name="scale-to-zero"),
    re_path(r"^v1/(?P<path>[a-z/]+)$", proxy.v1, name="v1"),
]
