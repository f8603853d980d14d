"""Instance pages, under /instances/ (the chip comparison and the estimator are the catalog's: /catalog/)."""

from django.urls import path, re_path

from . import jupyter_proxy
from .views import daily_power, pages, secrets, waiting

app_name = "instances"

urlpatterns = [
    path("", pages.instance_list, name="list"),
    path("new/", pages.launch, name="launch"),
    # The account's secrets: instances are what they are for. Before the instance routes, whose id would take
    # the word.
    path("secrets/", secrets.secret_list, name="secrets"),
    path("secrets/<str:name>/", secrets.secret_replace, name="secret-replace"),
    path("secrets/<str:name>/delete/", secrets.secret_delete, name="secret-delete"),
    path("waiting/", waiting.waiting_list, name="waiting-list"),
    path("waiting/<str:public_id>/", waiting.detail, name="waiting"),
    path("waiting/<str:public_id>/cancel/", waiting.cancel, name="waiting-cancel"),
    path("<str:public_id>/", pages.detail, name="detail"),
    path("<str:public_id>/start/", pages.start, name="start"),
    path("<str:public_id>/stop/", pages.stop, name="stop"),
    path("<str:public_id>/release/", pages.release, name="release"),
    path("<str:public_id>/auto-shutdown/", pages.auto_shutdown, name="auto-shutdown"),
    path("<str:public_id>/daily-power/", daily_power.save, name="daily-power"),
    path("<str:public_id>/metrics/", pages.metrics, name="metrics"),
    path("<str:public_id>/training/", pages.training, name="training"),
    path("<str:public_id>/ports/", pages.ports, name="ports"),
    path("<str:public_id>/ports/open/", pages.open_port, name="open-port"),
    # JupyterLab, proxied; its websockets are routed in config/asgi.py.
    re_path(r"^(?P<public_id>[^/]+)/lab/(?P<path>.*)$", jupyter_proxy.lab, name="lab"),
    path("<str:public_id>/lab-handoff/", jupyter_proxy.lab_handoff, name="lab-handoff"),
    path("<str:public_id>/logs/", pages.logs, name="logs"),
]
