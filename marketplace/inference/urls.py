"""Inference template pages, under /marketplace/inference/."""

from django.urls import path

from . import views

app_name = "inference"

urlpatterns = [
    path("", views.template_list, name="list"),
    path("<str:slug>/", views.template_detail, name="template"),
]
