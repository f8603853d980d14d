from django.urls import path

from . import ssh_key_views, verification_views, views

app_name = "console"

urlpatterns = [
    path("", views.home, name="home"),
    path("favicon.ico", views.favicon, name="favicon"),
    path("console/", views.dashboard, name="dashboard"),
    path("console/tokens/", views.tokens, name="tokens"),
    path("console/tokens/<uuid:public_id>/revoke/", views.revoke_token, name="revoke-token"),
    path("console/ssh-keys/", ssh_key_views.ssh_key_list, name="ssh-keys"),
    path("console/ssh-keys/<uuid:public_id>/delete/", ssh_key_views.delete_ssh_key, name="delete-ssh-key"),
    path("console/enterprise/", verification_views.enterprise_verification, name="enterprise-verification"),
    path("console/real-name/", verification_views.real_name, name="real-name"),
    path("console/student/", verification_views.student, name="student"),
]
