"""Inference template pages, under /marketplace/inference/."""

from django.urls import path

from ..views import templates

app_name = "inference"

urlpatterns = [
    path("", templates.template_list, name="list"),
    path("<str:slug>/", templates.template_detail, name="template"),
]
