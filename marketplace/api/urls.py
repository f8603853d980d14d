from django.urls import re_path

from . import views

REPO = r"(?P<org>[^/]+)/(?P<name>[^/]+?)"

urlpatterns = [
    re_path(r"^hub/?$", views.HubListView.as_view(), name="api-hub"),
    re_path(rf"^hub/{REPO}/like/?$", views.HubLikeView.as_view(), name="api-hub-like"),
    re_path(rf"^hub/{REPO}/?$", views.HubItemView.as_view(), name="api-hub-item"),
]
