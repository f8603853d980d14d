from django.urls import re_path

from . import views

urlpatterns = [
    re_path(r"^teams/?$", views.TeamListView.as_view(), name="api-teams"),
    re_path(r"^teams/invitations/accept/?$", views.AcceptView.as_view(), name="api-team-accept"),
    re_path(r"^teams/(?P<slug>[a-z0-9-]{1,40})/?$", views.TeamDetailView.as_view(), name="api-team"),
    re_path(r"^teams/(?P<slug>[a-z0-9-]{1,40})/invitations/?$", views.InvitationView.as_view(), name="api-team-invite"),
    re_path(
        r"^teams/(?P<slug>[a-z0-9-]{1,40})/members/(?P<user_id>[^/]{1,64})/?$",
        views.MemberView.as_view(),
        name="api-team-member",
    ),
]
