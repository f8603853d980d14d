from django.urls import path

from . import pages, views

app_name = "instances"

urlpatterns = [
    path("chips/", views.chips, name="chips"),
    path("estimator/", views.estimator_page, name="estimator"),
    path("instances/", pages.instance_list, name="list"),
    path("instances/new/", pages.launch, name="launch"),
    path("instances/<str:public_id>/", pages.detail, name="detail"),
    path("instances/<str:public_id>/start/", pages.start, name="start"),
    path("instances/<str:public_id>/stop/", pages.stop, name="stop"),
    path("instances/<str:public_id>/release/", pages.release, name="release"),
    path("instances/<str:public_id>/auto-shutdown/", pages.auto_shutdown, name="auto-shutdown"),
    path("instances/<str:public_id>/metrics/", pages.metrics, name="metrics"),
    path("instances/<str:public_id>/training/", pages.training, name="training"),
]
