"""Old public addresses, from before every app's pages moved under its own prefix, kept for bookmarks and links.

Each answers a GET or HEAD with a permanent redirect to the page's address now, query string kept. Only pages are
here: a form's POST target is not bookmarked, and a redirected POST would arrive as a GET without its body.
"""

from django.urls import path
from django.views.generic import RedirectView

app_name = "moved"


class MovedPermanently(RedirectView):
    permanent = True
    query_string = True
    http_method_names = ["get", "head"]


def moved(route: str, pattern_name: str, name: str):
    return path(route, MovedPermanently.as_view(pattern_name=pattern_name), name=name)


urlpatterns = [
    moved("pricing/", "catalog:pricing", "pricing"),
    moved("chips/", "catalog:chips", "chips"),
    moved("estimator/", "catalog:estimator", "estimator"),
    moved("hub/", "marketplace:hub", "hub"),
    moved("hub/new/", "marketplace:hub-new", "hub-new"),
    moved("hub/<str:org>/<str:name>", "marketplace:hub-item", "hub-item"),
    moved("hub/<str:org>/<str:name>/card", "marketplace:hub-card", "hub-card"),
    moved("console/secrets/", "instances:secrets", "secrets"),
]
