"""Job pages, under /jobs/."""

from django.urls import path

from . import views

app_name = "jobs"

urlpatterns = [
    path("", views.job_list, name="list"),
    path("new/", views.submit, name="submit"),
    path("<str:public_id>/", views.detail, name="detail"),
    path("<str:public_id>/cancel/", views.cancel, name="cancel"),
    path("<str:public_id>/rerun/", views.rerun, name="rerun"),
]
