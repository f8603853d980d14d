"""In real headless Chromium: an owner creates a team and invites a newcomer by e-mail; the newcomer opens the link,
signs up with that address, verifies it, logs in, lands back on the invitation and joins; the owner works in the
team, tops its wallet up in the sandbox checkout and gives the newcomer a budget of ¥5; the newcomer, on a phone,
launches on the team's wallet; the budget stop fires at ¥5 with the instance stopped (its disk kept), and the
team's members page and statement show the newcomer's spend."""

import re
from datetime import timedelta
from decimal import Decimal

import pytest
import time_machine
from django.conf import settings
from django.core import mail
from django.test import Client
from django.utils import timezone

from billing import budgets, metering, wallet
from billing.models import Notification
from instances.models import Instance
from instances.tests.fixtures import settle
from teams.models import Membership, Team
from tests.fixtures.services import screenshot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _log_in(context, live_server, user):
    client = Client()
    client.force_login(user)
    context.add_cookies(
        [
            {
                "name": settings.SESSION_COOKIE_NAME,
                "value": client.cookies[settings.SESSION_COOKIE_NAME].value,
                "url": live_server.url,
            },
            {"name": settings.LANGUAGE_COOKIE_NAME, "value": "en", "url": live_server.url},
        ]
    )


def test_an_owner_invites_a_newcomer_who_budgets_and_pays_for_them_on_the_team(
    page, browser, live_server, owner, catalog, instant
):
    owner_page = page
    _log_in(owner_page.context, live_server, owner)
    owner_page.goto(f"{live_server.url}/console/")
    owner_page.locator("#account-menu").click()
    owner_page.get_by_role("link", name="Teams").click()
    owner_page.fill("input[name=name]", "视觉实验室")
    owner_page.fill("input[name=slug]", "vision-lab")
    owner_page.get_by_role("button", name="Create team").click()
    owner_page.wait_for_url("**/teams/vision-lab/")
    owner_page.fill("#invite-form input[name=email]", "newcomer@example.com")
    owner_page.select_option("#invite-form select[name=role]", "developer")
    owner_page.get_by_role("button", name="Send invitation").click()
    owner_page.wait_for_url("**/teams/vision-lab/")
    assert owner_page.locator("#invitation-table").get_by_text("newcomer@example.com").is_visible()
    screenshot(owner_page, "teams-01-invited")

    # The newcomer, in a browser of their own, opens the link from the e-mail
    assert [m.to for m in mail.outbox] == [["newcomer@example.com"]]
    link = re.search(r"/teams/invitations/\S+/", mail.outbox[0].body).group(0)
    newcomer = browser.new_context(locale="zh-CN", viewport={"width": 390, "height": 844}).new_page()
    newcomer.goto(f"{live_server.url}{link}")
    assert "视觉实验室" in newcomer.locator("#invitation").inner_text()
    screenshot(newcomer, "teams-02-invitation-phone")
    newcomer.locator("#invitation a[href*='/accounts/signup/']").click()
    newcomer.fill("input[name=email]", "newcomer@example.com")
    newcomer.fill("input[name=password1]", "Kunpeng-Ascend-910B")
    newcomer.fill("input[name=password2]", "Kunpeng-Ascend-910B")
    newcomer.locator("main form button[type=submit]").click()
    newcomer.wait_for_url("**/accounts/confirm-email/")
    confirm = re.search(r"/accounts/confirm-email/\S+/", mail.outbox[-1].body).group(0)
    newcomer.goto(f"{live_server.url}{confirm}")
    newcomer.locator("main form button[type=submit]").click()
    newcomer.wait_for_url("**/accounts/login/")
    newcomer.fill("input[name=login]", "newcomer@example.com")
    newcomer.fill("input[name=password]", "Kunpeng-Ascend-910B")
    newcomer.locator("main form button[type=submit]").click()

    # The first login lands back on the invitation
    newcomer.wait_for_url(f"**{link}")
    newcomer.locator("#accept-invitation").click()
    newcomer.wait_for_url("**/teams/vision-lab/")
    assert "newcomer@example.com" in newcomer.locator("#member-table").inner_text()
    assert newcomer.locator("#invite-form").count() == 0  # a developer does not invite
    screenshot(newcomer, "teams-03-joined-phone")

    owner_page.reload()
    members = owner_page.locator("#member-table").inner_text()
    assert "newcomer@example.com" in members and "Developer" in members
    assert "joined" in owner_page.locator("#team-events").inner_text()

    # The owner works in the team: the header names it, the wallet is the team's, and a sandbox top-up fills it
    owner_page.goto(f"{live_server.url}/teams/")
    owner_page.locator("#work-in-vision-lab").click()
    owner_page.wait_for_url("**/instances/")
    assert "视觉实验室" in owner_page.locator("#context-team").inner_text()
    assert "Instances of 视觉实验室" in owner_page.locator("h1").inner_text()
    owner_page.goto(f"{live_server.url}/billing/")
    assert "Wallet of 视觉实验室" in owner_page.locator("h1").inner_text()
    owner_page.fill("#topup input[name=amount]", "100")
    owner_page.locator("#topup button[type=submit]").click()
    owner_page.locator("#sandbox-pay").click()
    owner_page.wait_for_url("**/billing/topup/success/**")
    assert wallet.summary(Team.objects.get(slug="vision-lab").account).cash == Decimal("100.00")
    assert wallet.summary(owner).cash == Decimal("0")
    screenshot(owner_page, "teams-04-team-topped-up")

    # The owner gives the newcomer a budget of ¥5 a month
    owner_page.goto(f"{live_server.url}/billing/members/")
    newcomer_id = Membership.objects.get(user__email="newcomer@example.com").user.public_id
    row = owner_page.locator(f"#spend-{newcomer_id}")
    row.locator("input[name=monthly_budget]").fill("5")
    row.get_by_role("button", name="Save").click()
    owner_page.wait_for_url("**/billing/members/")
    assert Membership.objects.get(user__email="newcomer@example.com").monthly_budget == Decimal("5.00")

    # The newcomer, on the phone, works in the team and launches on its wallet
    newcomer.goto(f"{live_server.url}/teams/")
    newcomer.locator("#work-in-vision-lab").click()
    newcomer.wait_for_url("**/instances/")
    newcomer.goto(f"{live_server.url}/instances/new/")
    assert newcomer.locator("#team-launch-note").is_visible()
    newcomer.select_option("#id_chip", "mlu370-x8")
    newcomer.wait_for_selector("#id_image option[value=pytorch-2\\.2-neuware]", state="attached")
    newcomer.fill("#id_name", "newcomer-run")
    newcomer.click("#launch-button")
    newcomer.wait_for_url("**/instances/*-*/")
    instance = Instance.objects.get(name="newcomer-run")
    assert instance.owner.team_account.slug == "vision-lab"
    screenshot(newcomer, "teams-05-launched-on-the-team-phone")

    # It runs until the newcomer's spend reaches ¥5 (¥1.53 an hour: at about 196 minutes); the tick then stops it
    settle()
    with time_machine.travel(timezone.now(), tick=False) as clock:
        for minutes in (150, 50):
            clock.shift(timedelta(minutes=minutes))
            metering.meter()
            settle()
        instance.refresh_from_db()
        assert instance.status == "stopped" and instance.events.filter(reason="member_budget").exists()
        newcomer.reload()
        assert newcomer.locator("#instance-badge").get_attribute("data-status") == "stopped"
        assert newcomer.locator("#release-countdown").is_visible()  # stopped, not released: its disk is kept
        screenshot(newcomer, "teams-06-stopped-at-the-budget-phone")

        # The team's members page and statement show the newcomer's spend
        owner_page.goto(f"{live_server.url}/billing/members/")
        shown = Decimal(owner_page.locator(f"#spend-{newcomer_id} [data-spent]").get_attribute("data-spent"))
        account = Team.objects.get(slug="vision-lab").account
        newcomer_pk = Membership.objects.get(user__email="newcomer@example.com").user_id
        assert shown == budgets.spent(account.pk, [newcomer_pk])[newcomer_pk] and Decimal("5") <= shown < Decimal("5.2")
        screenshot(owner_page, "teams-07-members-spending")
        owner_page.goto(f"{live_server.url}/billing/statements/")
        assert "newcomer-run" in owner_page.locator("#statement").inner_text()
    newcomer.context.close()
    # The newcomer and the team's billing people are told (the e-mails go out from the worker)
    told = set(Notification.objects.filter(kind="member_budget").values_list("user__email", flat=True))
    assert told == {"newcomer@example.com", Team.objects.get(slug="vision-lab").account.email}

    owner_page.locator("#context-personal").click()
    owner_page.wait_for_load_state()
    assert owner_page.locator("#context-team").count() == 0
