from django.urls import re_path

from accounts.api.routers import Router

from . import invoices, views

router = Router()
router.register("transactions", views.TransactionViewSet, basename="api-transaction")
router.register("topups", views.TopUpViewSet, basename="api-topup")

urlpatterns = [
    re_path(r"^quotes/?$", views.QuoteView.as_view(), name="api-quotes"),
    re_path(r"^wallet/?$", views.WalletView.as_view(), name="api-wallet"),
    re_path(r"^statements/?$", views.StatementView.as_view(), name="api-statements"),
    re_path(r"^vouchers/?$", views.VoucherView.as_view(), name="api-vouchers"),
    re_path(r"^invoices/?$", invoices.InvoiceListView.as_view(), name="api-invoices"),
    re_path(r"^invoices/(?P<public_id>[^/]+)/pdf/?$", invoices.InvoicePdfView.as_view(), name="api-invoice-pdf"),
    *router.urls,
]
