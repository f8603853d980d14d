from django.urls import path

from . import views

app_name = "ops"

urlpatterns = [
    path("", views.index, name="index"),
    path("capacity/", views.capacity, name="capacity"),
    path("capacity/nodes/<slug:zone>/<str:name>/drain/", views.set_drained, {"drained": True}, name="drain-node"),
    path("capacity/nodes/<slug:zone>/<str:name>/return/", views.set_drained, {"drained": False}, name="return-node"),
    path("revenue/", views.revenue, name="revenue"),
    path("revenue/subsidy-reconciliation.csv", views.reconciliation_csv, name="reconciliation-csv"),
    path("prices/", views.prices, name="prices"),
    path("subsidies/", views.subsidies, name="subsidies"),
    path("subsidies/<slug:slug>/pause/", views.set_programme_active, {"active": False}, name="pause-programme"),
    path("subsidies/<slug:slug>/resume/", views.set_programme_active, {"active": True}, name="resume-programme"),
    path("subsidies/<slug:slug>/budget/", views.change_budget, name="programme-budget"),
    path("reviews/", views.reviews, name="reviews"),
    path("reviews/verifications/<uuid:public_id>/", views.review_verification, name="review-verification"),
    path("reviews/images/<uuid:public_id>/", views.review_image, name="review-image"),
    path("users/", views.users, name="users"),
    path("users/<uuid:public_id>/", views.user_detail, name="user"),
    path("users/<uuid:public_id>/adjust-balance/", views.adjust_balance, name="adjust-balance"),
    path("instances/<uuid:public_id>/force-stop/", views.force_stop, name="force-stop"),
    path("audit/", views.audit_log, name="audit"),
    path("hub/", views.hub_repos, name="hub"),
    path("hub/<uuid:public_id>/take-down/", views.hub_repo_takedown, name="hub-takedown"),
    path("hub/<uuid:public_id>/restore/", views.hub_repo_restore, name="hub-restore"),
    path("vouchers/", views.vouchers, name="vouchers"),
    path("vouchers/<uuid:public_id>/codes.csv", views.voucher_codes_csv, name="voucher-codes-csv"),
    path("invoices/", views.invoices, name="invoices"),
    path("invoices/<uuid:public_id>/issue/", views.invoice_issue, name="invoice-issue"),
    path(
        "invoices/<uuid:public_id>/issue-through-provider/", views.invoice_issue_provider, name="invoice-issue-provider"
    ),
    path("invoices/<uuid:public_id>/reject/", views.invoice_reject, name="invoice-reject"),
    path("invoices/<uuid:public_id>/reverse/", views.invoice_reverse, name="invoice-reverse"),
    path("invoices/reconciliation.csv", views.invoice_reconciliation_csv, name="invoice-reconciliation-csv"),
]
