from django.urls import re_path

from . import views

urlpatterns = [
    re_path(r"^quotes/?$", views.QuoteView.as_view(), name="api-quotes"),
]
