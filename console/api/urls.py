from django.urls import path
from rest_framework.routers import SimpleRouter

from . import views

router = SimpleRouter(trailing_slash="/?")
router.register("tokens", views.ApiTokenViewSet, basename="api-token")

urlpatterns = [
    path("me", views.MeView.as_view(), name="api-me"),
    *router.urls,
]
