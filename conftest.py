"""Root pytest configuration: personas, the API client, and the rule that CI never skips real services.

Tests that need a real service carry a marker (``postgres``, ``redis``, ``browser``, ``slurm``, ``sandbox``). Outside
CI they
skip with a reason when the service is not configured; with ``CI=true`` a skip of a marked test is a failure,
so CI proves that PostgreSQL, Redis, Chromium and Slurm were really used.
"""

import os
from io import StringIO

import pytest
from django.core.cache import cache
from django.core.management import call_command
from django.core.management.commands import flush
from django.db import DEFAULT_DB_ALIAS
from django.db.backends.postgresql import base as postgresql
from django.db.backends.sqlite3 import base as sqlite3
from django.utils import translation

from billing import catalog_names
from billing.quote import forget_shared_book

pytest_plugins = [
    "tests.fixtures.personas",
    "tests.fixtures.services",
    "tests.asgi_server",
    "tests.fixtures.catalog",
    "tests.fixtures.migrations",
    "storage.tests.fixtures",
    "instances.tests.fixtures",
    "instances.tests.local_fixtures",
    "instances.tests.slurm_fixtures",
    "instances.tests.ssh_fixtures",
    "inference.tests.fixtures",
    "marketplace.tests.image_fixtures",
    "marketplace.tests.imported_fixtures",
    "marketplace.tests.latest_hf",
    "backoffice.tests.fixtures",
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

    translation.activate("en")
    yield
    translation.deactivate()


@pytest.fixture(autouse=True)
def _empty_cache():
    # Rate-limit counters live in the cache, and each process keeps a shared price book and the catalog's names; each
    # test starts with none.

    cache.clear()
    forget_shared_book()
    catalog_names.forget()
    yield
    cache.clear()
    forget_shared_book()
    catalog_names.forget()


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup, django_db_blocker):
    # About half the tests start from the catalog (chips, zones, nodes, prices, plans), and the loader writes row by
    # row through the services: loaded once here, each test rolls back to it.
    with django_db_blocker.unblock():
        load_catalog()


def load_catalog():
    """What ``manage.py load_catalog`` writes: regions, zones, chips, nodes and specs, then prices, plans and
    subsidy programmes."""
    call_command("load_catalog", stdout=StringIO())


# Rows every test database keeps from its migration: the content types and permissions Django creates after
# migrating. A flush leaves them (with their ids) instead of deleting them and creating them again after every test.
# The catalog is not kept: a transactional test may change it, so the flush deletes it and loads it again.
KEPT_BY_FLUSH = frozenset({"django_content_type", "auth_permission"})


def pytest_configure(config):
    # A transactional test (a live server, threads, a worker) empties the tables when it ends. On PostgreSQL,
    # Django does that with one TRUNCATE of all ~80 tables, which makes new files for each table and index, and then
    # creates every content type and permission again: about a second per test here. Deleting the few rows a test
    # wrote costs milliseconds. Every foreign key Django creates on PostgreSQL is DEFERRABLE INITIALLY DEFERRED and
    # the flush runs in one transaction, so the order of the deletes does not matter. A flush that must reset
    # sequences still does what Django does.

    PostgreSQL, SQLite = postgresql.DatabaseWrapper.ops_class, sqlite3.DatabaseWrapper.ops_class

    def keeping(original, delete):
        def sql_flush(self, style, tables, *, reset_sequences=False, allow_cascade=False):
            if reset_sequences or allow_cascade:
                return original(self, style, tables, reset_sequences=reset_sequences, allow_cascade=allow_cascade)
            tables = [table for table in tables if table not in KEPT_BY_FLUSH]
            if not delete:
                return original(self, style, tables)
            return [f"{style.SQL_KEYWORD('DELETE FROM')} {style.SQL_FIELD(self.quote_name(t))};" for t in tables]

        return sql_flush

    PostgreSQL.sql_flush = keeping(PostgreSQL.sql_flush, delete=True)
    SQLite.sql_flush = keeping(SQLite.sql_flush, delete=False)  # SQLite's flush deletes already
    flush.emit_post_migrate_signal = _after_flush


def _after_flush(verbosity, interactive, database, **kwargs):
    # What the post-migrate signal would create (content types, permissions) was kept; the catalog was deleted with
    # the test's own rows (its nodes' reserved cards, its prices and plans may have changed), so it is loaded again
    # as the database began.
    if database == DEFAULT_DB_ALIAS:
        load_catalog()
