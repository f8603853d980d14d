"""Paged lists never fail on a page size or position a client makes up: ``limit`` has one ceiling on every API list,
a huge ``limit``/``offset`` (or a made-up HTML ``page``) answers a page, and a negative or non-numeric one is a 400
naming the parameter — never a server error, and never the first page passed off as the one asked for."""

import pytest

from core.api.pagination import MAX_LIMIT
from storage import services as storage_services
from storage.models import Entry
from tests.fixtures.catalog import load_hub

pytestmark = pytest.mark.django_db

LISTS = [
    "tokens",
    "chips",
    "zones",
    "specs",
    "transactions",
    "topups",
    "instances",
    "disks",
    "storage/entries",
    "images",
    "hub",
]
HUGE = str(10**30)
QUERIES = [
    f"limit={HUGE}",
    f"offset={HUGE}",
    f"limit={HUGE}&offset={HUGE}",
    f"limit={MAX_LIMIT + 1}",
    "limit=",
    "offset=0",
]
BAD_QUERIES = [
    ("limit=-1", "limit"),
    ("limit=abc", "limit"),
    ("limit=0", "limit"),
    ("limit=1.5", "limit"),
    ("offset=-5", "offset"),
    ("offset=abc", "offset"),
    ("limit=5&offset=%EF%BC%91", "offset"),
]


@pytest.fixture
def rows(owner, catalog, fund):
    """At least one row in each list, so that the page is really read from the database."""

    load_hub()
    fund(owner, "50")
    Entry.objects.create(owner=owner, kind="folder", name="data", path="/data")


@pytest.mark.parametrize("query", QUERIES)
@pytest.mark.parametrize("url", LISTS)
def test_a_made_up_limit_or_offset_answers_a_page_not_a_server_error(owner_api, rows, url, query):
    owner_api.raise_request_exception = False

    response = owner_api.get(f"/api/v1/{url}?{query}")

    assert response.status_code == 200, response.content[:300]
    assert len(response.json()["results"]) <= MAX_LIMIT


@pytest.mark.parametrize(("query", "name"), BAD_QUERIES)
@pytest.mark.parametrize("url", ["tokens", "instances", "storage/entries", "hub"])
def test_a_negative_or_non_numeric_limit_or_offset_is_a_400_naming_it(owner_api, rows, url, query, name):
    response = owner_api.get(f"/api/v1/{url}?{query}", HTTP_ACCEPT_LANGUAGE="en")

    assert response.status_code == 400, response.content[:300]
    assert response.json()["message"].startswith(f"{name}: Must be a whole number")
    assert list(response.json()["errors"]) == [name]


def test_the_schema_states_the_minimums(owner_api):
    schema = owner_api.get("/api/schema/?format=json").json()
    parameters = {p["name"]: p["schema"] for p in schema["paths"]["/api/v1/tokens/"]["get"]["parameters"]}

    def integer(schema):  # an optional parameter may also be sent empty (= absent): the integer is one branch
        return next(s for s in schema.get("anyOf", [schema]) if s.get("type") == "integer")

    assert integer(parameters["limit"])["minimum"] == 1 and integer(parameters["offset"])["minimum"] == 0


def test_a_huge_limit_is_lowered_to_the_ceiling_and_still_returns_a_small_folder_whole(owner_api, owner):
    owner_api.raise_request_exception = False
    for n in range(3):
        storage_services.create_folder(owner, None, f"f{n}")

    page = owner_api.get(f"/api/v1/storage/entries?limit={HUGE}").json()

    assert page["count"] == 3 and len(page["results"]) == 3
    assert f"limit={MAX_LIMIT}" not in (page["next"] or "")  # everything fits: no next page


@pytest.mark.parametrize("page", ["999999999999999999999", "-1", "abc", "0", "1e9"])
@pytest.mark.parametrize(
    "url", ["/instances/", "/billing/transactions/", "/billing/statements/", "/marketplace/", "/marketplace/hub/"]
)
def test_a_made_up_page_number_on_an_html_list_shows_a_page(owner_client, catalog, url, page):
    response = owner_client.get(url, {"page": page})

    assert response.status_code == 200
