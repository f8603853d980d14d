"""Top-level URLs: each app's pages under its own prefix, then what stays at the root and why.

An app's URL conf spells only the addresses under its prefix; ``tests/test_url_prefixes.py`` walks the resolver
and fails on a route outside its app's prefix or a root route not listed here.
"""

from csp.decorators import csp_update
from django.conf import settings
from django.contrib import admin
from django.urls import include, path, re_path
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerSplitView

from accounts.views import pages as console_views
from backoffice.admin_site import staff_only
from inference import proxy as inference_proxy

urlpatterns = [
    path("console/", include("accounts.urls")),
    path("instances/", include("instances.urls")),
    path("jobs/", include("jobs.urls")),
    path("storage/", include("storage.urls")),
    path("billing/", include("billing.urls")),
    path("catalog/", include("config.catalog_urls")),
    path("marketplace/inference/", include("inference.urls.templates")),
    path("marketplace/", include("marketplace.urls")),
    path("endpoints/", include("inference.urls.endpoints")),
    path("teams/", include("teams.urls")),
    path("notifications/", include("notifications.urls")),
    # At the root, each for a reason. The home page and the favicon are where browsers and people look; health
    # checks probe a fixed address.
    path("", console_views.home, name="home"),
    path("favicon.ico", console_views.favicon, name="favicon"),
    path("healthz", console_views.healthz, name="healthz"),
    # The documentation site: the user's guide in Chinese and English, the operator's guide, the architecture.
    re_path(r"^docs/(?P<path>.*)$", console_views.docs, name="docs"),
    # The OpenAI-compatible proxy: /v1/ is the base URL its clients are configured with.
    re_path(r"^v1/(?P<path>[a-z/]+)$", inference_proxy.v1, name="openai-v1"),
    # Old addresses of pages that moved under their app's prefix: permanent redirects for bookmarks.
    path("", include("config.moved_urls")),
    # Third-party and cross-cutting confs under prefixes of their own: allauth, the language switch, the API.
    path("accounts/", include("allauth.urls")),
    path("i18n/setlang/", console_views.set_language, name="set_language"),
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
    # The back office and the admin: staff pages, apart from the apps'.
    path("ops/", include("backoffice.urls")),
    path(settings.ADMIN_URL, staff_only(admin.site.urls)),
    # The Hugging Face Hub API (huggingface_hub with HF_ENDPOINT set to this console): its protocol puts
    # /api/models/… and /<repo>/resolve/… at the endpoint's root. Last, its paths are broad.
    path("", include("marketplace.hub.hf_urls")),
]

handler400 = "accounts.views.pages.error_400"
handler403 = "accounts.views.pages.error_403"
handler404 = "accounts.views.pages.error_404"
handler500 = "accounts.views.pages.error_500"
