"""Every app's API routes under /api/v1/."""

from django.urls import include, path

from console.api import views as console_api

urlpatterns = [
    path("", include("console.api.urls")),
    path("", include("instances.api.urls")),
    path("", include("billing.api.urls")),
    path("", include("storage.api.urls")),
    path("", include("marketplace.api.urls")),
    path("", include("inference.api")),
    path("", include("teams.api.urls")),
    path("", include("jobs.api.urls")),
    path("<path:unknown>", console_api.not_found),
]
