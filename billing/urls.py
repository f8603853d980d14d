"""The wallet's pages, under /billing/ (the public price list is the catalog's: /catalog/pricing/)."""

from django.urls import path

from .views import invoices, wallet

app_name = "billing"

urlpatterns = [
    path("", wallet.wallet_page, name="wallet"),
    path("topup/", wallet.topup, name="topup"),
    path("topup/success/", wallet.topup_success, name="topup-success"),
    path("topup/cancel/", wallet.topup_cancel, name="topup-cancel"),
    path("topup/sandbox/<uuid:public_id>/", wallet.sandbox_checkout, name="sandbox-checkout"),
    path("vouchers/redeem/", wallet.voucher_redeem, name="voucher-redeem"),
    path("spending-cap/", wallet.spending_cap, name="spending-cap"),
    path("transactions/", wallet.transactions, name="transactions"),
    path("statements/", wallet.statement, name="statements"),
    path("members/", wallet.members, name="members"),
    path("members/<str:user_id>/budget/", wallet.member_budget, name="member-budget"),
    path("invoices/", invoices.invoice_list, name="invoices"),
    path("invoices/<uuid:public_id>/pdf/", invoices.invoice_pdf, name="invoice-pdf"),
    path("stripe/webhook", wallet.stripe_webhook, name="stripe-webhook"),
]
