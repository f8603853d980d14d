"""Security checks: CSP and secure headers on every page, no inline script or style the policy would block, CSRF on
every form POST, sanitised Markdown, and the API docs still working under the policy in a real browser."""

import re
from pathlib import Path

import pytest
from django.conf import settings
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver

from marketplace.hub import services as hub
from marketplace.images.services import render_description

BASE = Path(settings.BASE_DIR)
TEMPLATE_DIRS = [BASE / "templates", *BASE.glob("*/templates")]


def _walk(resolver, prefix=""):
    for item in resolver.url_patterns:
        if isinstance(item, URLResolver):
            yield from _walk(item, prefix + str(item.pattern))
        elif isinstance(item, URLPattern):
            yield prefix + str(item.pattern), item


def plain_page_urls() -> list[str]:
    """Every route of the URL conf without path parameters, outside the API (pages and forms)."""
    urls = []
    for pattern, _ in _walk(get_resolver()):
        if "<" in pattern or "(?P" in pattern or pattern.startswith(("api/v1/", "v1/", settings.ADMIN_URL)):
            continue
        urls.append("/" + pattern.replace("^", "").replace("$", "").replace("\\", ""))
    return sorted(set(urls))


DOCS_PAGES = {"/api/docs/", "/api/redoc/"}

# POST targets that take no CSRF token on purpose, each with its own authentication.
CSRF_EXEMPT = {
    "/billing/stripe/webhook": "Stripe's signed webhook (Stripe-Signature header)",
    "/api/schema/": "read-only schema (GET only); the API authenticates by token and DRF enforces CSRF on sessions",
    # The Hugging Face Hub API writes only with an API token in the Authorization header, never with the session's
    # cookie, so a cross-site form cannot act as the user (without a token it is a 401).
    "/api/repos/create/?": "the Hub API: token only",
    "/api/validate-yaml/?": "the Hub API: checks a card's YAML, writes nothing",
    "/api/repos/delete/?": "the Hub API: token only (DELETE)",
    "/api/whoami-v2/?": "the Hub API: token only (GET)",
    # The Xet CAS takes only the short-lived Xet token the Hub API issues to a read-write API token.
    "/hub-xet/": "the Xet CAS's root: answers 404 to everything",
    "/hub-xet/v1/shards/?": "the Xet CAS: Xet token only",
    "/hub-xet/v1/(?:chunks|xorb-grants|xorb-commits|reconstructions)/": "the Xet CAS: 404 (not offered) to all",
}


def test_every_page_sends_the_content_security_policy_and_the_secure_headers(owner_client, catalog):
    checked = 0
    for url in plain_page_urls():
        response = owner_client.get(url)
        assert response.status_code != 500, url
        if not response.get("Content-Type", "").startswith("text/html"):
            continue
        csp = response.get("Content-Security-Policy", "")
        assert "default-src 'self'" in csp and "script-src 'self'" in csp, f"{url}: {csp!r}"
        assert "'unsafe-eval'" not in csp, url
        assert "'unsafe-inline'" not in csp or url in DOCS_PAGES, url  # the docs' own generated styles only
        assert response["X-Content-Type-Options"] == "nosniff", url
        assert response["Referrer-Policy"] == "same-origin", url
        assert response.get("X-Frame-Options") == "DENY" or "frame-ancestors 'none'" in csp, url
        checked += 1
    assert checked > 20  # the walk really found the console's pages


def test_no_template_has_inline_script_style_attributes_or_event_handlers():
    problems = []
    for folder in TEMPLATE_DIRS:
        for path in folder.rglob("*.html"):
            text = path.read_text(encoding="utf-8")
            for tag in re.findall(r"<script\b[^>]*>", text):
                if "src=" not in tag:
                    problems.append(f"{path.relative_to(BASE)}: inline {tag}")
            for match in re.finditer(r"\s(style|on[a-z]+)\s*=\s*[\"']", text):
                problems.append(f"{path.relative_to(BASE)}: {match.group(1)}= attribute")
    assert problems == []


def test_every_form_post_without_a_csrf_token_is_refused(owner, catalog):
    client = Client(enforce_csrf_checks=True)
    client.force_login(owner)
    refused = 0
    for url in plain_page_urls():
        if url in CSRF_EXEMPT:
            continue
        response = client.post(url, {"name": "x", "amount": "50"})
        assert response.status_code == 403, f"POST {url} without a CSRF token → {response.status_code}"
        refused += 1
    assert refused > 20


def test_the_api_refuses_a_session_post_without_a_csrf_token(owner):
    client = Client(enforce_csrf_checks=True)
    client.force_login(owner)
    response = client.post("/api/v1/tokens/", {"name": "x", "scope": "read"}, content_type="application/json")
    assert response.status_code == 403 and response.json()["code"]


EVIL_MARKDOWN = """# Card

<script>alert(1)</script>
<img src=x onerror="alert(2)">
[click](javascript:alert(3))
<a href="https://example.com" onclick="alert(4)">ok</a>
"""


def test_markdown_users_write_is_rendered_without_scripts_handlers_or_javascript_links(owner, owner_client):

    item = hub.save_item(repo="owner-lab/evil", owner=owner, card=EVIL_MARKDOWN)
    page = owner_client.get(f"/marketplace/hub/{item.repo}").content.decode()
    body = page.split("<main", 1)[-1]
    assert "<script>alert" not in body
    assert not re.search(r"<[a-z]+[^>]*\son(error|click)=", body)
    assert not re.search(r"<a[^>]*href=[\"']?javascript:", body)


@pytest.mark.parametrize("markdown", [EVIL_MARKDOWN, '<a href="javascript:alert(5)">x</a> <svg onload=alert(6)>'])
def test_image_descriptions_are_rendered_without_scripts_handlers_or_javascript_links(markdown):

    html = render_description(markdown)
    assert "<script" not in html and "<svg" not in html
    assert not re.search(r"<[a-z]+[^>]*\son[a-z]+=", html)
    assert not re.search(r"<a[^>]*href=[\"']?javascript:", html)  # escaped text is harmless; a link is not


@pytest.mark.browser
@pytest.mark.parametrize("url, ready", [("/api/docs/", ".swagger-ui .opblock"), ("/api/redoc/", ".api-content")])
def test_the_api_docs_load_in_chromium_without_content_security_policy_errors(live_server, page, url, ready):
    errors = []
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    page.goto(f"{live_server.url}{url}")
    page.wait_for_selector(ready, timeout=20_000)
    name = "security-api-docs" if "docs" in url else "security-api-redoc"
    out = BASE / "artifacts" / "screenshots"
    out.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(out / f"{name}.png"))  # the viewport only: the whole reference is very long
    # Redoc's footer logo comes from its CDN: the policy blocks it, as it should (the page works without it).
    errors = [e for e in errors if "cdn.redoc.ly" not in e]
    assert [e for e in errors if "Content Security Policy" in e or "Refused" in e] == []
    # Everything else stays strict: the relaxed style rule belongs to the docs pages alone.
    assert "'unsafe-inline'" not in page.request.get(f"{live_server.url}/").headers["content-security-policy"]


def test_top_ups_are_rate_limited_on_the_page_and_the_api(owner, owner_client, owner_api, settings):
    settings.TOPUP_RATE_LIMIT = "3/h"
    pages = [owner_client.post("/billing/topup/", {"amount": "50"}).status_code for _ in range(3)]
    assert all(status == 302 for status in pages)  # on to the (sandbox) checkout
    owner_client.cookies["django_language"] = "en"  # pages follow the language switch
    refused = owner_client.post("/billing/topup/", {"amount": "50"})
    assert refused.status_code == 429 and "Too many top-ups" in refused.content.decode()
    response = owner_api.post("/api/v1/topups/", {"amount": "50.00"}, format="json")
    assert response.status_code == 429 and response.json()["code"] == "rate_limited"
