"""Instance pages, under /instances/ (the chip comparison and the estimator are the catalog's: /catalog/)."""

from django.urls import path, re_path

from . import jupyter_proxy, secret_views, views

app_name = "instances"

urlpatterns = [
    path("", views.instance_list, name="list"),
    path("new/", views.launch, name="launch"),
    # The account's secrets: instances are what they are for. Before the instance routes, whose id would take
    # the word.
    path("secrets/", secret_views.secret_list, name="secrets"),
    path("secrets/<str:name>/", secret_views.secret_replace, name="secret-replace"),
    path("secrets/<str:name>/delete/", secret_views.secret_delete, name="secret-delete"),
    path("<str:public_id>/", views.detail, name="detail"),
    path("<str:public_id>/start/", views.start, name="start"),
    path("<str:public_id>/stop/", views.stop, name="stop"),
    path("<str:public_id>/release/", views.release, name="release"),
    path("<str:public_id>/auto-shutdown/", views.auto_shutdown, name="auto-shutdown"),
    path("<str:public_id>/metrics/", views.metrics, name="metrics"),
    path("<str:public_id>/training/", views.training, name="training"),
    path("<str:public_id>/ports/", views.ports, name="ports"),
    path("<str:public_id>/ports/open/", views.open_port, name="open-port"),
    # JupyterLab, proxied; its websockets are routed in config/asgi.py.
    re_path(r"^(?P<public_id>[^/]+)/lab/(?P<path>.*)$", jupyter_proxy.lab, name="lab"),
    path("<str:public_id>/lab-handoff/", jupyter_proxy.lab_handoff, name="lab-handoff"),
    path("<str:public_id>/logs/", views.logs, name="logs"),
]
