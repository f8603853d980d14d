from django.urls import path, re_path

from . import catalog_views, jupyter_proxy, secret_views, views

app_name = "instances"

urlpatterns = [
    path("chips/", catalog_views.chips, name="chips"),
    path("estimator/", catalog_views.estimator_page, name="estimator"),
    path("instances/", views.instance_list, name="list"),
    path("instances/new/", views.launch, name="launch"),
    path("instances/<str:public_id>/", views.detail, name="detail"),
    path("instances/<str:public_id>/start/", views.start, name="start"),
    path("instances/<str:public_id>/stop/", views.stop, name="stop"),
    path("instances/<str:public_id>/release/", views.release, name="release"),
    path("instances/<str:public_id>/auto-shutdown/", views.auto_shutdown, name="auto-shutdown"),
    path("instances/<str:public_id>/metrics/", views.metrics, name="metrics"),
    path("instances/<str:public_id>/training/", views.training, name="training"),
    # JupyterLab, proxied; its websockets are routed in config/asgi.py.
    re_path(r"^instances/(?P<public_id>[^/]+)/lab/(?P<path>.*)$", jupyter_proxy.lab, name="lab"),
    path("instances/<str:public_id>/lab-handoff/", jupyter_proxy.lab_handoff, name="lab-handoff"),
    path("instances/<str:public_id>/logs/", views.logs, name="logs"),
    # The account's secrets, beside its API tokens (/console/tokens/): instances are what they are for.
    path("console/secrets/", secret_views.secret_list, name="secrets"),
    path("console/secrets/<str:name>/", secret_views.secret_replace, name="secret-replace"),
    path("console/secrets/<str:name>/delete/", secret_views.secret_delete, name="secret-delete"),
]
