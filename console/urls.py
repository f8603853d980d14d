"""The account's console pages, under /console/ (the home page and the favicon are at the root: config/urls.py)."""

from django.urls import path

from . import ssh_key_views, verification_views, views

app_name = "console"

urlpatterns = [
    path("", views.dashboard, name="dashboard"),
    path("status/", views.status_page, name="status"),
    path("tokens/", views.tokens, name="tokens"),
    path("tokens/<uuid:public_id>/revoke/", views.revoke_token, name="revoke-token"),
    path("ssh-keys/", ssh_key_views.ssh_key_list, name="ssh-keys"),
    path("ssh-keys/<uuid:public_id>/delete/", ssh_key_views.delete_ssh_key, name="delete-ssh-key"),
    path("enterprise/", verification_views.enterprise_verification, name="enterprise-verification"),
    path("real-name/", verification_views.real_name, name="real-name"),
    path("student/", verification_views.student, name="student"),
]
