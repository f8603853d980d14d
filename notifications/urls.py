from django.urls import path

from . import views

app_name = "notifications"

urlpatterns = [
    path("", views.channel_list, name="channels"),
    path("channels/<uuid:public_id>/", views.channel_detail, name="channel"),
    path("channels/<uuid:public_id>/delete/", views.channel_delete, name="channel-delete"),
    path("channels/<uuid:public_id>/test/", views.channel_test, name="channel-test"),
]
