from django.urls import re_path

from console.api.routers import Router

from . import views

router = Router()
router.register("transactions", views.TransactionViewSet, basename="api-transaction")
router.register("topups", views.TopUpViewSet, basename="api-topup")

urlpatterns = [
    re_path(r"^quotes/?$", views.QuoteView.as_view(), name="api-quotes"),
    re_path(r"^wallet/?$", views.WalletView.as_view(), name="api-wallet"),
    re_path(r"^statements/?$", views.StatementView.as_view(), name="api-statements"),
    *router.urls,
]
