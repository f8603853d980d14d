"""Every app's pages under its own prefix: the URL conf is walked, so a route that strays outside its app's prefix, or
a new route at the root, fails here. Old public addresses answer a permanent redirect to the new ones."""

from types import ModuleType

import pytest
from django.conf import settings
from django.urls import URLPattern, URLResolver, get_resolver

from marketplace.hub import services as hub

pytestmark = pytest.mark.django_db

# Each app's URL conf and the prefix config/urls.py mounts it at.
APP_PREFIXES = {
    "accounts.urls": "console/",
    "instances.urls": "instances/",
    "storage.urls": "storage/",
    "billing.urls": "billing/",
    "config.catalog_urls": "catalog/",
    "marketplace.urls": "marketplace/",
    "inference.urls.templates": "marketplace/inference/",
    "inference.urls.endpoints": "endpoints/",
    "teams.urls": "teams/",
    "jobs.urls": "jobs/",
    "notifications.urls": "notifications/",
}

# Confs mounted at the root or at a prefix of no app's, each for the reason config/urls.py gives.
OTHER_CONFS = {
    "config.moved_urls": "",  # old addresses, redirected
    "marketplace.hub.hf_urls": "",  # the Hugging Face Hub API: its client's protocol fixes the paths
    "allauth.urls": "accounts/",
    "config.api_urls": "api/v1/",
    "backoffice.urls": "ops/",
}

# Routes of config/urls.py itself: all at the root, each for the reason given there.
ROOT_ROUTES = {
    "",  # the home page
    "favicon.ico",
    "healthz",
    "^v1/(?P<path>[a-z/]+)$",  # the OpenAI-compatible proxy's base URL
    "^docs/(?P<path>.*)$",  # the documentation site
    "i18n/setlang/",  # the language switch (Django's, which also keeps a signed-in person's choice)
    "api/schema/",
    "api/docs/",
    "api/redoc/",
}

# Where the views of each module may be reached (the longest matching module name wins): an app's views under its
# prefix, the catalog pages (rendered by instances and billing) under catalog/, the APIs under api/v1/.
VIEW_PREFIXES = {
    "console": ("console/",),
    "accounts.views.pages": ("console/", ""),  # the home page, the favicon and healthz are at the root
    "accounts.ops": ("ops/",),
    "instances": ("instances/",),
    "billing.views.catalog": ("catalog/",),
    "storage": ("storage/",),
    "billing": ("billing/",),
    "billing.views.pricing": ("catalog/",),
    "marketplace": ("marketplace/",),
    "marketplace.hub.hfapi": ("",),
    "inference": ("endpoints/",),
    "inference.views.templates": ("marketplace/inference/",),
    "inference.proxy": ("v1/",),
    "teams": ("teams/",),
    "notifications": ("notifications/",),
}
API_MODULE_MARKER = ".api."


def _conf_name(resolver: URLResolver) -> str:
    module = resolver.urlconf_module
    return module.__name__ if isinstance(module, ModuleType) else repr(resolver.pattern)


def _routes(resolver, prefix="", conf="config.urls"):
    """(full path pattern, innermost conf's module name, the route) for every route of the URL conf."""
    for item in resolver.url_patterns:
        if isinstance(item, URLResolver):
            yield from _routes(item, prefix + str(item.pattern), _conf_name(item))
        elif isinstance(item, URLPattern):
            yield prefix + str(item.pattern), conf, item


def _view_module(route: URLPattern) -> str:
    return route.callback.__module__


def test_every_top_level_conf_is_an_apps_under_its_prefix_or_a_named_exception():
    mounted = {}
    for item in get_resolver().url_patterns:
        if isinstance(item, URLResolver) and str(item.pattern) != settings.ADMIN_URL:
            mounted[_conf_name(item)] = str(item.pattern)
    assert mounted == APP_PREFIXES | OTHER_CONFS


def test_config_urls_own_routes_are_only_the_named_root_exceptions():
    own = {str(item.pattern) for item in get_resolver().url_patterns if isinstance(item, URLPattern)}
    assert own == ROOT_ROUTES


def test_every_route_of_an_apps_conf_is_under_that_apps_prefix():
    strays = [
        (path, conf)
        for path, conf, _ in _routes(get_resolver())
        if conf in APP_PREFIXES and not path.startswith(APP_PREFIXES[conf])
    ]
    assert strays == []
    seen = {conf for _, conf, _ in _routes(get_resolver())}
    assert set(APP_PREFIXES) <= seen  # the walk really went through every app's conf


def _allowed_prefixes(module: str) -> tuple[str, ...] | None:
    if API_MODULE_MARKER in f"{module}.":
        return ("api/v1/",)
    owners = [name for name in VIEW_PREFIXES if module == name or module.startswith(name + ".")]
    return VIEW_PREFIXES[max(owners, key=len)] if owners else None


def _reached_as_allowed(path: str, conf: str, allowed: tuple[str, ...]) -> bool:
    at_root = conf in ("config.urls", "marketplace.hub.hf_urls")  # "" allows the named root exceptions only
    return any(path.lstrip("^").startswith(prefix) if prefix else at_root for prefix in allowed)


def test_every_apps_view_is_reached_under_its_apps_prefix():
    # A view of one app's under another app's prefix (storage's mount actions under instances/, say) fails here.
    strays = []
    for path, conf, route in _routes(get_resolver()):
        allowed = _allowed_prefixes(_view_module(route))
        # Third-party views (allauth, the admin, DRF's and the schema's) have no app's prefix to keep.
        if allowed is not None and conf != "config.moved_urls" and not _reached_as_allowed(path, conf, allowed):
            strays.append((path, _view_module(route)))
    assert strays == []


@pytest.fixture
def published(owner):
    return hub.save_item(repo="owner-lab/tiny", owner=owner)


# Old address (with a query string) → the address it answers with.
MOVED = [
    ("/pricing/?chip=ascend-910b&cards=8", "/catalog/pricing/?chip=ascend-910b&cards=8"),
    ("/chips/", "/catalog/chips/"),
    ("/estimator/?params_b=7&tokens_b=100", "/catalog/estimator/?params_b=7&tokens_b=100"),
    ("/hub/?q=chatglm&kind=model", "/marketplace/hub/?q=chatglm&kind=model"),
    ("/hub/new/", "/marketplace/hub/new/"),
    ("/hub/owner-lab/tiny?tab=files", "/marketplace/hub/owner-lab/tiny?tab=files"),
    ("/hub/owner-lab/tiny/card", "/marketplace/hub/owner-lab/tiny/card"),
    ("/console/secrets/", "/instances/secrets/"),
]


@pytest.mark.parametrize(("old", "new"), MOVED)
def test_an_old_bookmarked_address_redirects_permanently_to_the_new_one(client, old, new):
    response = client.get(old)
    assert response.status_code == 301 and response["Location"] == new
    assert client.head(old).status_code == 301


def test_the_old_addresses_redirect_every_get_route_of_the_moved_conf():
    moved_routes = {"/" + path for path, conf, _ in _routes(get_resolver()) if conf == "config.moved_urls"}
    tested = {old.split("?")[0].replace("owner-lab/tiny", "<str:org>/<str:name>") for old, _ in MOVED}
    assert moved_routes == tested


def test_an_old_address_does_not_turn_a_post_into_a_get(owner, client):
    # A redirected POST would arrive as a GET without its body: the old addresses take GETs only.
    client.force_login(owner)
    assert client.post("/console/secrets/", {"name": "X", "value": "y"}).status_code == 405


@pytest.mark.parametrize("new", sorted({new.split("?")[0] for _, new in MOVED}))
def test_the_new_addresses_serve(owner_client, catalog, published, new):
    assert owner_client.get(new).status_code == 200


def test_the_root_exceptions_stay_where_clients_look_for_them(client):
    assert client.get("/").status_code == 200
    assert client.get("/healthz")["Content-Type"] == "application/json"
    assert client.get("/favicon.ico")["Location"].endswith("favicon.svg")
    assert client.post("/v1/chat/completions", "{}", content_type="application/json").status_code == 401


def test_the_catalogs_own_address_opens_its_price_list(client):
    response = client.get("/catalog/")
    assert response.status_code == 302 and response["Location"] == "/catalog/pricing/"
