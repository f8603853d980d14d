"""Endpoint pages, under /endpoints/ (the OpenAI-compatible proxy is at /v1/, the root: config/urls.py)."""

from django.urls import path

from . import views

app_name = "endpoints"

urlpatterns = [
    path("", views.endpoint_list, name="list"),
    path("deploy/<str:slug>/", views.deploy, name="deploy"),
    path("<str:public_id>/", views.detail, name="detail"),
    path("<str:public_id>/chart/", views.chart, name="chart"),
    path("<str:public_id>/keys/", views.create_key, name="create-key"),
    path("<str:public_id>/keys/<str:key_id>/revoke/", views.revoke_key, name="revoke-key"),
    path("<str:public_id>/stop/", views.stop, name="stop"),
    path("<str:public_id>/start/", views.start, name="start"),
    path("<str:public_id>/release/", views.release, name="release"),
    path("<str:public_id>/scale-to-zero/", views.scale_to_zero, name="scale-to-zero"),
]
