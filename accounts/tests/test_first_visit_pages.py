"""What a first visitor meets outside the console proper: the landing page's way into the public marketplace and
hub, the favicon, and the error pages in production (DEBUG off)."""

import json
from decimal import ROUND_DOWN, Decimal

import pytest
from django.db import connection
from django.template.loader import render_to_string
from django.test import Client, RequestFactory
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import translation

from accounts.views import pages as views
from billing.quote import load_price_book, quote
from catalog.models import Chip
from teams import services as team_services
from teams.models import Membership
from teams.roles import Role
from tests.fixtures.factories import UserFactory

pytestmark = pytest.mark.django_db


def test_the_landing_page_links_to_the_public_marketplace_and_hub(client):
    html = client.get("/", HTTP_ACCEPT_LANGUAGE="en").content.decode()
    assert f'href="{reverse("marketplace:list")}" id="home-marketplace-link"' in html
    assert f'href="{reverse("marketplace:hub")}" id="home-hub-link"' in html
    assert client.get(reverse("marketplace:list")).status_code == 200  # both really are public
    assert client.get(reverse("marketplace:hub")).status_code == 200


def test_every_page_links_a_favicon_and_favicon_ico_redirects_to_it(client):
    html = client.get("/").content.decode()
    assert '<link rel="icon" href="/static/favicon.svg" type="image/svg+xml">' in html
    response = client.get("/favicon.ico")
    assert response.status_code == 302 and response["Location"] == "/static/favicon.svg"


def test_in_production_a_missing_page_is_a_404_in_the_consoles_look(settings, client):
    settings.DEBUG = False
    response = client.get("/no-such-page/", HTTP_ACCEPT_LANGUAGE="en")
    html = response.content.decode()
    assert response.status_code == 404 and response["Content-Type"].startswith("text/html")
    assert 'class="navbar navbar-expand-lg' in html and 'class="navbar-brand' in html  # the console's header
    assert 'id="not-found-home"' in html and f'href="{reverse("home")}"' in html
    assert f'href="{reverse("marketplace:hub")}"' in html  # somewhere to go next


def test_in_production_api_paths_still_answer_json_404(settings, client):
    settings.DEBUG = False
    response = client.get("/api/v1/no-such-thing/")
    assert response.status_code == 404 and response.json()["code"] == "not_found"
    console_404 = views.error_404(RequestFactory().get("/api/v1/instances/nope/"))
    assert console_404["Content-Type"] == "application/json"


def test_the_500_page_renders_without_a_request_and_keeps_the_consoles_look():
    # Django renders 500.html with an empty context: nothing may depend on the request
    with translation.override("zh-hans"):
        html = render_to_string("500.html")
    assert "500" in html and 'class="navbar-brand' in html and "/static/css/app.css" in html
    assert "返回首页" in html


def test_the_500_handler_answers_the_standalone_page_and_json_on_the_api():
    page = views.error_500(RequestFactory().get("/instances/"))
    assert page.status_code == 500 and 'id="server-error"' in page.content.decode()
    api = views.error_500(RequestFactory().get("/api/v1/me"))
    assert api.status_code == 500 and json.loads(api.content)["code"] == "server_error"


def _cheapest_card_per_hour():

    book = load_price_book()
    prices = []
    for chip in Chip.objects.rentable():
        try:
            prices.append((quote(chip=chip, cards=1, book=book).payable_per_hour, chip))
        except Exception:  # noqa: BLE001  (a chip without a price is simply not offered)
            continue
    return min(prices, key=lambda row: row[0])


def test_a_newcomers_dashboard_offers_a_first_launch_and_says_what_the_trial_buys(owner_client, catalog, settings):

    settings.TRIAL_CREDIT_CNY = "10"
    owner_client.cookies[settings.LANGUAGE_COOKIE_NAME] = "en"
    html = owner_client.get(reverse("console:dashboard")).content.decode()
    card = html.split('id="first-steps"', 1)[1].split("</section>", 1)[0]
    assert f'href="{reverse("instances:launch")}" id="first-launch"' in card
    per_hour, chip = _cheapest_card_per_hour()
    hours = (Decimal("10") / per_hour).quantize(Decimal("0.1"), rounding=ROUND_DOWN)
    assert f"about {hours} hours of one {chip.label} card" in " ".join(card.split())
    assert "¥10.00" in card


def test_the_first_steps_card_goes_once_there_is_an_instance(owner_client, launch, django_assert_num_queries):
    assert 'id="first-steps"' in owner_client.get(reverse("console:dashboard")).content.decode()
    launch(name="first")
    with CaptureQueriesContext(connection) as first:
        html = owner_client.get(reverse("console:dashboard")).content.decode()
    assert 'id="first-steps"' not in html
    # Once launched, always launched: later dashboards do not look at the instances again.
    with django_assert_num_queries(len(first.captured_queries) - 1):
        html = owner_client.get(reverse("console:dashboard")).content.decode()
    assert 'id="first-steps"' not in html


def test_a_member_who_never_launched_sees_no_first_steps_once_the_team_has_an_instance(owner, launch):

    team = team_services.create_team(owner, name="Vision", slug="vision")
    member = UserFactory(email="member@example.com")
    Membership.objects.create(team=team, user=member, role=Role.DEVELOPER)
    client = Client()
    client.force_login(member)
    assert 'id="first-steps"' in client.get(reverse("console:dashboard")).content.decode()
    launch(user=team.account, name="team-run")
    assert 'id="first-steps"' not in client.get(reverse("console:dashboard")).content.decode()  # own context
    assert client.post(reverse("teams:switch"), {"team": "vision"}).status_code == 302
    assert 'id="first-steps"' not in client.get(reverse("console:dashboard")).content.decode()  # the team's
