"""Every app's API routes under /api/v1/."""

from django.urls import include, path

from accounts.api import views as console_api

urlpatterns = [
    path("", include("accounts.api.urls")),
    path("", include("instances.api.urls")),
    path("", include("billing.api.urls")),
    path("", include("storage.api.urls")),
    path("", include("marketplace.api.urls")),
    path("", include("inference.api")),
    path("", include("teams.api.urls")),
    path("", include("notifications.api.urls")),
    path("", include("jobs.api.urls")),
    path("<path:unknown>", console_api.not_found),
]
