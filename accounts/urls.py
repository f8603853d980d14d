"""The account's console pages, under /console/ (the home page and the favicon are at the root: config/urls.py)."""

from django.urls import path

from .views import pages, ssh_keys, verification

app_name = "console"

urlpatterns = [
    path("", pages.dashboard, name="dashboard"),
    path("status/", pages.status_page, name="status"),
    path("tokens/", pages.tokens, name="tokens"),
    path("tokens/<uuid:public_id>/revoke/", pages.revoke_token, name="revoke-token"),
    path("ssh-keys/", ssh_keys.ssh_key_list, name="ssh-keys"),
    path("ssh-keys/<uuid:public_id>/delete/", ssh_keys.delete_ssh_key, name="delete-ssh-key"),
    path("enterprise/", verification.enterprise_verification, name="enterprise-verification"),
    path("real-name/", verification.real_name, name="real-name"),
    path("student/", verification.student, name="student"),
]
