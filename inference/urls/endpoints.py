"""Endpoint pages, under /endpoints/."""

from django.urls import path

from ..views import endpoints

app_name = "endpoints"

urlpatterns = [
    path("", endpoints.endpoint_list, name="list"),
    path("deploy/<str:slug>/", endpoints.deploy, name="deploy"),
    path("<str:public_id>/", endpoints.detail, name="detail"),
    path("<str:public_id>/chart/", endpoints.chart, name="chart"),
    path("<str:public_id>/keys/", endpoints.create_key, name="create-key"),
    path("<str:public_id>/keys/<str:key_id>/revoke/", endpoints.revoke_key, name="revoke-key"),
    path("<str:public_id>/stop/", endpoints.stop, name="stop"),
    path("<str:public_id>/start/", endpoints.start, name="start"),
    path("<str:public_id>/release/", endpoints.release, name="release"),
    path("<str:public_id>/scale-to-zero/", endpoints.scale_to_zero, name="scale-to-zero"),
]
