from django.urls import path

from . import invoice_views, views, wallet_views

app_name = "billing"

urlpatterns = [
    path("pricing/", views.pricing, name="pricing"),
    path("billing/", wallet_views.wallet_page, name="wallet"),
    path("billing/topup/", wallet_views.topup, name="topup"),
    path("billing/topup/success/", wallet_views.topup_success, name="topup-success"),
    path("billing/topup/cancel/", wallet_views.topup_cancel, name="topup-cancel"),
    path("billing/topup/sandbox/<uuid:public_id>/", wallet_views.sandbox_checkout, name="sandbox-checkout"),
    path("billing/vouchers/redeem/", wallet_views.voucher_redeem, name="voucher-redeem"),
    path("billing/spending-cap/", wallet_views.spending_cap, name="spending-cap"),
    path("billing/transactions/", wallet_views.transactions, name="transactions"),
    path("billing/statements/", wallet_views.statement, name="statements"),
    path("billing/members/", wallet_views.members, name="members"),
    path("billing/members/<str:user_id>/budget/", wallet_views.member_budget, name="member-budget"),
    path("billing/invoices/", invoice_views.invoice_list, name="invoices"),
    path("billing/invoices/<uuid:public_id>/pdf/", invoice_views.invoice_pdf, name="invoice-pdf"),
    path("billing/stripe/webhook", wallet_views.stripe_webhook, name="stripe-webhook"),
]
