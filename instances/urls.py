"""Instance pages, under /instances/ (the chip comparison and the estimator are the catalog's: /catalog/)."""

from django.urls import path, re_path

from . import jupyter_proxy
from .views import instances, secrets

app_name = "instances"

urlpatterns = [
    path("", instances.instance_list, name="list"),
    path("new/", instances.launch, name="launch"),
    # The account's secrets: instances are what they are for. Before the instance routes, whose id would take
    # the word.
    path("secrets/", secrets.secret_list, name="secrets"),
    path("secrets/<str:name>/", secrets.secret_replace, name="secret-replace"),
    path("secrets/<str:name>/delete/", secrets.secret_delete, name="secret-delete"),
    path("<str:public_id>/", instances.detail, name="detail"),
    path("<str:public_id>/start/", instances.start, name="start"),
    path("<str:public_id>/stop/", instances.stop, name="stop"),
    path("<str:public_id>/release/", instances.release, name="release"),
    path("<str:public_id>/auto-shutdown/", instances.auto_shutdown, name="auto-shutdown"),
    path("<str:public_id>/metrics/", instances.metrics, name="metrics"),
    path("<str:public_id>/training/", instances.training, name="training"),
    path("<str:public_id>/ports/", instances.ports, name="ports"),
    path("<str:public_id>/ports/open/", instances.open_port, name="open-port"),
    # JupyterLab, proxied; its websockets are routed in config/asgi.py.
    re_path(r"^(?P<public_id>[^/]+)/lab/(?P<path>.*)$", jupyter_proxy.lab, name="lab"),
    path("<str:public_id>/lab-handoff/", jupyter_proxy.lab_handoff, name="lab-handoff"),
    path("<str:public_id>/logs/", instances.logs, name="logs"),
]
