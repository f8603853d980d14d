"""Inference template pages under the marketplace."""

from django.urls import path

from . import views

app_name = "inference"

urlpatterns = [
    path("marketplace/inference/", views.template_list, name="list"),
    path("marketplace/inference/<str:slug>/", views.template_detail, name="template"),
]
