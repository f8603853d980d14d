from django.urls import path

from . import views

app_name = "teams"

urlpatterns = [
    path("", views.team_list, name="list"),
    path("invitations/<str:token>/", views.invitation, name="invitation"),
    path("switch/", views.switch, name="switch"),
    path("<slug:slug>/", views.team_detail, name="detail"),
    path("<slug:slug>/invite/", views.team_invite, name="invite"),
    path("<slug:slug>/members/<str:user_id>/role/", views.member_role, name="member-role"),
    path("<slug:slug>/members/<str:user_id>/remove/", views.member_remove, name="member-remove"),
    path("<slug:slug>/invitations/<uuid:invitation_id>/revoke/", views.invitation_revoke, name="invitation-revoke"),
]
