from django.urls import path

from . import verification, views
from .routers import Router

router = Router()
router.register("tokens", views.ApiTokenViewSet, basename="api-token")

urlpatterns = [
    path("me", views.MeView.as_view(), name="api-me"),
    path(
        "enterprise-verification", verification.EnterpriseVerificationView.as_view(), name="api-enterprise-verification"
    ),
    *router.urls,
]
