"""Root pytest configuration: personas, the API client, and the rule that CI never skips real services.

Tests that need a real service carry a marker (``postgres``, ``redis``, ``browser``, ``slurm``, ``sandbox``). Outside
CI they
skip with a reason when the service is not configured; with ``CI=true`` a skip of a marked test is a failure,
so CI proves that PostgreSQL, Redis, Chromium and Slurm were really used.
"""

import os

import pytest

pytest_plugins = [
    "tests.fixtures.personas",
    "tests.fixtures.services",
    "tests.asgi_server",
    "tests.fixtures.catalog",
    "storage.tests.fixtures",
    "instances.tests.fixtures",
    "instances.tests.local_fixtures",
    "instances.tests.slurm_fixtures",
    "instances.tests.ssh_fixtures",
    "inference.tests.fixtures",
    "marketplace.tests.image_fixtures",
    "console.ops.tests.fixtures",
]

IN_CI = os.environ.get("CI", "").lower() in {"1", "true", "yes"}
SERVICE_MARKERS = ("postgres", "redis", "browser", "slurm", "sandbox")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"rep_{report.when}", report)  # lets fixtures see whether the test failed
    if IN_CI and report.skipped and any(item.get_closest_marker(m) for m in SERVICE_MARKERS):
        report.outcome = "failed"
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        report.longrepr = f"CI=true: a test that needs a real service must run, but it was skipped: {reason}"


@pytest.fixture(autouse=True)
def _fast_password_hasher(settings):
    # Argon2 is the product's hasher; tests use a cheap one so that creating users costs nothing.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(autouse=True)
def _english_outside_requests():
    # Messages raised by services outside a request are checked in English; pages and the API still pick their
    # language per request (Chinese by default), as users see them.
    from django.utils import translation

    translation.activate("en")
    yield
    translation.deactivate()


@pytest.fixture(autouse=True)
def _empty_cache():
    # Rate-limit counters live in the cache; each test starts with none.
    from django.core.cache import cache

    cache.clear()
    yield
    cache.clear()
