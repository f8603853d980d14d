"""The wallet's pages, under /billing/ (the public price list is the catalog's: /catalog/pricing/)."""

from django.urls import path

from . import invoice_views, wallet_views

app_name = "billing"

urlpatterns = [
    path("", wallet_views.wallet_page, name="wallet"),
    path("topup/", wallet_views.topup, name="topup"),
    path("topup/success/", wallet_views.topup_success, name="topup-success"),
    path("topup/cancel/", wallet_views.topup_cancel, name="topup-cancel"),
    path("topup/sandbox/<uuid:public_id>/", wallet_views.sandbox_checkout, name="sandbox-checkout"),
    path("vouchers/redeem/", wallet_views.voucher_redeem, name="voucher-redeem"),
    path("spending-cap/", wallet_views.spending_cap, name="spending-cap"),
    path("transactions/", wallet_views.transactions, name="transactions"),
    path("statements/", wallet_views.statement, name="statements"),
    path("members/", wallet_views.members, name="members"),
    path("members/<str:user_id>/budget/", wallet_views.member_budget, name="member-budget"),
    path("invoices/", invoice_views.invoice_list, name="invoices"),
    path("invoices/<uuid:public_id>/pdf/", invoice_views.invoice_pdf, name="invoice-pdf"),
    path("stripe/webhook", wallet_views.stripe_webhook, name="stripe-webhook"),
]
