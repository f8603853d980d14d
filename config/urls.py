"""Top-level URLs: the console pages, accounts, the API and its docs, health and the admin."""

from csp.decorators import csp_update
from django.conf import settings
from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerSplitView

from console import views as console_views
from console.ops.admin_site import staff_only

urlpatterns = [
    path("", include("console.urls")),
    path("", include("instances.urls")),
    path("", include("billing.urls")),
    path("", include("marketplace.urls")),
    path("", include("storage.urls")),
    path("", include("inference.urls")),
    path("", include("marketplace.inference.urls")),
    path("teams/", include("teams.urls")),
    path("accounts/", include("allauth.urls")),
    path("i18n/", include("django.conf.urls.i18n")),
    path("healthz", console_views.healthz, name="healthz"),
    path("api/v1/", include("config.api_urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    # The API docs' scripts are files (Swagger UI's split view; Redoc's bundle); both generate their own styles at
    # run time (Redoc also a blob: worker), so only these two pages, which show no user content, may apply them.
    path(
        "api/docs/",
        csp_update({"style-src": ["'unsafe-inline'"]})(SpectacularSwaggerSplitView.as_view(url_name="api-schema")),
        name="api-docs",
    ),
    path(
        "api/redoc/",
        csp_update({"style-src": ["'unsafe-inline'"], "worker-src": ["'self'", "blob:"]})(
            SpectacularRedocView.as_view(url_name="api-schema")
        ),
        name="api-redoc",
    ),
    path("ops/", include("console.ops.urls")),
    path(settings.ADMIN_URL, staff_only(admin.site.urls)),
    # The Hugging Face Hub API (huggingface_hub with HF_ENDPOINT set to this console): last, its paths are broad.
    path("", include("marketplace.hub.hf_urls")),
]

handler400 = "console.views.error_400"
handler403 = "console.views.error_403"
handler404 = "console.views.error_404"
handler500 = "console.views.error_500"
