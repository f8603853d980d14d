"""The public pricing page: prices, the live calculator, the billing table per state, query counts."""

import re
from datetime import timedelta
from decimal import Decimal

import pytest
from django.conf import settings
from django.core import mail
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from accounts import students
from billing.models import Price
from catalog.models import Chip, InstanceSpec, Node, Zone

pytestmark = pytest.mark.django_db
# 12, plus one for the per-GB-day prices of disks and cloud storage, plus one for whether a logged-in visitor is a
# verified student (the student programme's eligibility, read once per page)
PRICING_MAX_QUERIES = 14
# Once this process has built the shared price book, a view reads the price version and what the budgeted
# programmes have spent instead of seven queries for prices, plans, programmes with their chips and zones, and offers.
PRICING_REPEAT_MAX_QUERIES = PRICING_MAX_QUERIES - 5


def _english(client):
    client.cookies[settings.LANGUAGE_COOKIE_NAME] = "en"
    return client


def test_a_visitor_sees_prices_with_the_subsidy_and_spot(client, catalog):
    response = _english(client).get(reverse("catalog:pricing"))

    assert response.status_code == 200
    html = response.content.decode()
    assert "¥1.71" in html  # 910B after the Xinchuang subsidy
    assert "¥1.026" in html  # and as spot, exactly (never rounded to ¥1.03)
    assert "¥4.80" in html  # A100 list price
    assert "Price not published yet" in html  # RTX 4090


def test_the_pricing_page_publishes_the_billing_table_per_state(client, catalog):
    html = _english(client).get(reverse("catalog:pricing")).content.decode()

    assert 'id="billing-states"' in html
    for text in ("Creating", "Starting", "never became healthy", "Running", "Stopped", "release countdown"):
        assert text in html
    assert "15 days" in html


def test_the_calculator_returns_only_the_breakdown_to_htmx(client, catalog):
    query = {"chip": "a100-80g", "cards": "8", "plan": "payg", "term": "30", "term_unit": "days", "zone": ""}

    response = _english(client).get(reverse("catalog:pricing"), query, HTTP_HX_REQUEST="true")

    html = response.content.decode()
    assert response.status_code == 200
    assert html.lstrip().startswith('<div id="quote-breakdown"')
    assert "¥27,648.00" in html


def test_the_calculator_shows_spot_and_subsidy_for_the_910b(client, catalog):
    query = {"chip": "ascend-910b", "cards": "1", "plan": "payg", "spot": "on", "term": "1", "term_unit": "hours"}

    html = client.get(reverse("catalog:pricing"), query, HTTP_HX_REQUEST="true").content.decode()

    assert 'id="payable-per-hour">¥1.026<' in html  # ¥1.90 × 0.6 spot × 0.9 subsidy, exactly


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"term": "-1"}, "at least 0.01"),
        ({"term": "0"}, "at least 0.01"),
        ({"term": "lots"}, "must be a number"),
        ({"term": "99999999"}, "at most ten years"),
        ({"chip": "h100"}, "Choose a chip"),
        ({"cards": "3"}, "1, 2, 4 or 8"),
        ({"plan": "daily", "spot": "on"}, "pay-as-you-go only"),
        ({"chip": "rtx-4090"}, "Choose a chip"),  # not offered until it has a price
        ({"chip": "a100-80g", "zone": "cn-east-xc"}, "domestic chips only"),
    ],
)
def test_bad_calculator_input_gets_a_clear_message_never_a_500(client, catalog, change, message):
    query = {"chip": "ascend-910b", "cards": "1", "plan": "payg", "term": "1", "term_unit": "hours"} | change

    full = _english(client).get(reverse("catalog:pricing"), query)
    partial = client.get(reverse("catalog:pricing"), query, HTTP_HX_REQUEST="true")

    assert full.status_code == 400
    assert message in full.content.decode()
    assert partial.status_code == 200  # htmx swaps only successful responses
    assert message in partial.content.decode()


def test_the_pricing_page_renders_in_chinese_by_default(client, catalog):
    html = client.get(reverse("catalog:pricing")).content.decode()

    assert "昇腾 910B" in html
    assert "信创上云补贴" in html


def test_a_signed_in_user_sees_the_same_page(owner_client, catalog):
    assert owner_client.get(reverse("catalog:pricing")).status_code == 200


def _add_chips(n):
    zone = Zone.objects.get(slug="cn-east-a")
    for i in range(n):
        chip = Chip.objects.create(slug=f"extra-{i}", name=f"Extra {i}", vendor="X", backend="cuda", memory_gb=16)
        Node.objects.create(zone=zone, chip=chip, name=f"extra-{i}", cards=8)
        Price.objects.create(chip=chip, per_hour=Decimal("2.5"), effective_from=timezone.now())
        for cards in (1, 2, 4, 8):
            InstanceSpec.objects.create(
                slug=f"extra-{i}-x{cards}", chip=chip, cards=cards, vcpus=8, memory_gb=8, system_disk_gb=50
            )


def _count(client, url):
    with CaptureQueriesContext(connection) as queries:
        assert client.get(url).status_code == 200
    return len(queries)


@pytest.mark.parametrize("persona", ["client", "owner_client"])
def test_the_pricing_page_query_count_does_not_grow_with_chips_and_specs(
    request, catalog, django_assert_max_num_queries, persona
):
    client = request.getfixturevalue(persona)
    url = reverse("catalog:pricing")
    _count(client, url)
    before = _count(client, url)
    _add_chips(5)

    with django_assert_max_num_queries(PRICING_MAX_QUERIES):
        response = client.get(url)  # the price book is built again: the prices changed

    assert "Extra 4" in response.content.decode()
    assert _count(client, url) == before


@pytest.mark.parametrize("persona", ["client", "owner_client"])
def test_a_second_view_of_the_pricing_page_reuses_the_price_book_and_runs_fewer_queries(request, catalog, persona):
    client = request.getfixturevalue(persona)
    url = reverse("catalog:pricing")

    first, second = _count(client, url), _count(client, url)

    assert first <= PRICING_MAX_QUERIES
    assert second <= first - 5
    assert second <= PRICING_REPEAT_MAX_QUERIES


def _signed_in(user):
    page = Client()
    page.cookies[settings.LANGUAGE_COOKIE_NAME] = "en"
    page.force_login(user)
    return page


def test_a_signed_in_users_price_list_is_kept_per_the_state_of_their_book(
    owner, stranger, catalog, django_capture_on_commit_callbacks
):
    """Kept for one state of the book, never shown to a user whose book differs: a student's prices are not served to
    another user, nor the other way round; a new price shows at once."""
    url = reverse("catalog:pricing")
    plain, student = _signed_in(stranger), _signed_in(owner)
    assert "−20%" not in plain.get(url).content.decode()
    with django_capture_on_commit_callbacks(execute=True):
        students.send_code(owner, "me@ruc.edu.cn")
    students.confirm(owner, re.search(r"\b(\d{6})\b", mail.outbox[-1].body).group(1))

    assert "−20%" in student.get(url).content.decode()
    first, second = _count(plain, url), _count(plain, url)
    assert second == first and "−20%" not in plain.get(url).content.decode()
    assert second <= PRICING_REPEAT_MAX_QUERIES - 2  # kept: the table is not built again

    chip = Chip.objects.get(slug="a100-80g")
    Price.objects.create(chip=chip, per_hour=Decimal("77.70"), effective_from=timezone.now(), note="new list")
    assert "77.70" in plain.get(url).content.decode()


def test_a_students_price_shows_at_once_on_a_page_seen_before_and_ends_on_its_date(
    owner, catalog, django_capture_on_commit_callbacks, time_machine, settings
):
    settings.STUDENT_VERIFIED_DAYS = 1
    url = reverse("catalog:pricing")
    page = _signed_in(owner)
    assert "−20%" not in page.get(url).content.decode()

    with django_capture_on_commit_callbacks(execute=True):
        students.send_code(owner, "li@ruc.edu.cn")
    students.confirm(owner, re.search(r"\b(\d{6})\b", mail.outbox[-1].body).group(1))
    assert "−20%" in page.get(url).content.decode()  # at once, on the page that was looked at before

    # The verification ends on its own date, with nothing written.
    time_machine.move_to(timezone.now() + timedelta(days=1, minutes=1))
    assert "−20%" not in page.get(url).content.decode()
