"""Members' monthly budgets on a team's wallet: set by the billing roles, the gate at launch, the stop when running
usage reaches the budget (notice, checkpoint signal, disks kept), and who is told."""

import uuid
from datetime import timedelta
from decimal import Decimal

import pytest
import time_machine
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from billing import budgets, metering, wallet
from billing.models import LedgerTransaction, Notification, SubsidyProgramme, SubsidyUsage, UsageSession
from instances import launching, lifecycle
from instances.choices import Reason, Status
from instances.models import Instance
from instances.tests.fixtures import settle
from teams import services
from teams.models import Membership, TeamEvent
from teams.roles import Role
from tests.fixtures.factories import UserFactory
from tests.fixtures.personas import _token_client

pytestmark = pytest.mark.django_db


@pytest.fixture
def team(owner):
    team = services.create_team(owner, name="视觉实验室", slug="vision-lab")
    wallet.adjust_balance(
        user=team.account, amount=Decimal("500"), reason="test", staff=None, idempotency_key=str(uuid.uuid4())
    )
    return team


def _member(team, role, email=None):
    user = UserFactory(email=email or f"{role}@example.com")
    Membership.objects.create(team=team, user=user, role=role)
    return user


def _browser(user, team_slug="vision-lab") -> Client:
    client = Client()
    client.cookies["django_language"] = "en"
    client.force_login(user)
    client.post(reverse("teams:switch"), {"team": team_slug})
    return client


def _launch(team, member, name="run"):
    request = launching.LaunchRequest(name=name, chip="mlu370-x8", image="pytorch-2.2-neuware")  # ¥1.53 an hour
    return launching.launch(team.account, request, by=member)


def _budget(team, owner, member, amount):
    services.set_budget(services.membership(owner, team.slug), member.public_id, amount)


def test_billing_roles_set_budgets_on_the_members_page_and_others_cannot(team, owner):
    developer = _member(team, Role.DEVELOPER)
    billing = _member(team, Role.BILLING)
    client = _browser(billing)
    page = client.get(reverse("billing:members"))
    assert page.status_code == 200 and "Members' spending in 视觉实验室" in page.content.decode()
    url = reverse("billing:member-budget", args=[developer.public_id])
    assert client.post(url, {"monthly_budget": "5"}).status_code == 302
    assert Membership.objects.get(user=developer).monthly_budget == Decimal("5.00")
    event = TeamEvent.objects.get(action="budget_changed")
    assert (event.actor, event.subject, event.detail) == (billing, "developer@example.com", "¥5.00")

    for bad in ("-1", "abc", "1.234", "NaN", "1e9"):
        refused = client.post(url, {"monthly_budget": bad})
        assert refused.status_code == 400 and "Enter a budget in yuan" in refused.content.decode(), bad
    assert Membership.objects.get(user=developer).monthly_budget == Decimal("5.00")  # nothing half-written
    assert client.post(url, {"monthly_budget": ""}).status_code == 302
    assert Membership.objects.get(user=developer).monthly_budget is None

    other = _browser(developer)
    assert other.get(reverse("billing:members")).status_code == 403
    assert other.post(url, {"monthly_budget": "999"}).status_code == 403
    assert Membership.objects.get(user=developer).monthly_budget is None
    personal = Client()
    personal.force_login(billing)
    assert personal.get(reverse("billing:members")).status_code == 404  # a person has no members


def test_the_api_sets_a_budget_with_the_billing_permission(team, owner):
    developer = _member(team, Role.DEVELOPER)
    url = f"/api/v1/teams/vision-lab/members/{developer.public_id}"
    answer = _token_client(owner).patch(url, {"monthly_budget": "12.50"}, format="json")
    assert answer.status_code == 200 and answer.json()["monthly_budget"] == "12.50"
    refused = _token_client(developer).patch(url, {"monthly_budget": "1000"}, format="json")
    assert refused.status_code == 403 and refused.json()["code"] == "permission_denied"
    bad = _token_client(owner).patch(url, {"monthly_budget": "-3"}, format="json")
    assert bad.status_code == 400 and bad.json()["code"] == "invalid_budget"
    both = _token_client(owner).patch(url, {"role": "read_only", "monthly_budget": "oops"}, format="json")
    assert both.status_code == 400
    assert Membership.objects.get(user=developer).role == Role.DEVELOPER  # neither change happened
    assert _token_client(owner).patch(url, {}, format="json").status_code == 400


def test_a_launch_past_the_members_budget_is_refused_with_what_is_left(catalog, instant, team, owner):
    developer = _member(team, Role.DEVELOPER)
    _budget(team, owner, developer, "2")
    _launch(team, developer, "first")  # ¥1.53 of ¥2
    with pytest.raises(budgets.BudgetExceeded) as refused:
        _launch(team, developer, "second")  # one more hour of both is ¥3.06
    assert "Your monthly budget in 视觉实验室 is ¥2.00" in str(refused.value.message)
    assert Instance.objects.count() == 1
    # The budget is the member's: the owner (no budget) launches on the same wallet.
    _launch(team, owner, "owners")
    assert Instance.objects.count() == 2

    client = _browser(developer)
    form = {
        "chip": "mlu370-x8",
        "cards": "1",
        "plan": "payg",
        "image": "pytorch-2.2-neuware",
        "name": "third",
        "term_end_action": "continue",
    }
    page = client.post(reverse("instances:launch"), form)
    assert page.status_code == 400 and "Your monthly budget in 视觉实验室" in page.content.decode()


def test_running_usage_that_reaches_the_budget_stops_that_members_instances_and_tells_them(
    catalog, instant, eager_tasks, team, owner, mailoutbox, django_capture_on_commit_callbacks
):
    developer = _member(team, Role.DEVELOPER)
    colleague = _member(team, Role.DEVELOPER, "colleague@example.com")
    billing = _member(team, Role.BILLING)
    _budget(team, owner, developer, "5")
    with time_machine.travel(timezone.now(), tick=False) as clock:
        mine = _launch(team, developer, "mine")
        theirs = _launch(team, colleague, "theirs")
        settle()
        clock.shift(timedelta(minutes=150))  # ¥3.83 of ¥5: nothing happens yet
        with django_capture_on_commit_callbacks(execute=True):
            metering.meter()
        assert Instance.objects.get(pk=mine.pk).wanted == "running"
        clock.shift(timedelta(minutes=50))  # 200 minutes: ¥5.10
        with django_capture_on_commit_callbacks(execute=True):
            metering.meter()
            metering.meter()  # the next tick asks nothing again
        settle()
        assert budgets.spent(team.account_id, [developer.pk])[developer.pk] == Decimal("5.10")
        page = _browser(billing).get(reverse("billing:members")).content.decode()
        assert 'data-spent="5.10"' in page
        later = timezone.now()
    mine, theirs = Instance.objects.get(pk=mine.pk), Instance.objects.get(pk=theirs.pk)
    assert mine.status == Status.STOPPED and mine.events.filter(reason=Reason.MEMBER_BUDGET).exists()
    assert theirs.status == Status.RUNNING  # a colleague without a budget runs on
    charged = LedgerTransaction.objects.filter(user=team.account, kind="usage")
    assert set(charged.values_list("member_id", flat=True)) == {developer.pk, colleague.pk}

    told = Notification.objects.filter(kind="member_budget")
    assert sorted(n.user_id for n in told) == sorted([developer.pk, team.account_id])
    assert "You reached your monthly budget of ¥5.00 in 视觉实验室" in told.get(user=developer).message
    to = sorted(address for m in mailoutbox for address in m.to)
    assert to == sorted(["developer@example.com", "owner@example.com", billing.email])

    # A start past the budget is refused; raising it lets the member go on.
    with time_machine.travel(later, tick=False):
        with pytest.raises(budgets.BudgetExceeded):
            lifecycle.start(Instance.objects.with_related().get(pk=mine.pk))
        _budget(team, owner, developer, "50")
        lifecycle.start(Instance.objects.with_related().get(pk=mine.pk))


def test_a_persons_subsidy_cap_is_one_whichever_wallet_pays(catalog, instant, team, owner):

    SubsidyProgramme.objects.filter(slug="xinchuang-2026").update(monthly_cap_per_user=Decimal("0.05"))
    developer = _member(team, Role.DEVELOPER)
    request = launching.LaunchRequest(name="q", chip="mlu370-x8", image="pytorch-2.2-neuware")
    assert launching.preview(team.account, request, by=developer).subsidy_per_hour > 0
    with time_machine.travel(timezone.now(), tick=False) as clock:
        _launch(team, developer, "subsidised")
        settle()
        clock.shift(timedelta(minutes=60))
        metering.meter()
        # The team's charges used the developer's cap, not a cap of the team's own.
        usage = SubsidyUsage.objects.get()
        assert (usage.user, usage.amount) == (developer, Decimal("0.05"))
        # So the developer's next quote has no subsidy left, on the team's wallet as on their own; the owner's has.
        assert launching.preview(team.account, request, by=developer).subsidy_per_hour == 0
        assert launching.preview(developer, request).subsidy_per_hour == 0
        assert launching.preview(team.account, request, by=owner).subsidy_per_hour > 0


def test_starting_a_colleagues_instance_runs_it_on_ones_own_budget(catalog, instant, team, owner):
    colleague = _member(team, Role.DEVELOPER, "colleague@example.com")
    broke = _member(team, Role.DEVELOPER, "broke@example.com")
    _budget(team, owner, broke, "0")
    theirs = _launch(team, colleague, "theirs")
    settle()
    lifecycle.stop(Instance.objects.with_related().get(pk=theirs.pk))
    settle()
    with pytest.raises(budgets.BudgetExceeded):
        lifecycle.start(Instance.objects.with_related().get(pk=theirs.pk), by=broke)
    assert Instance.objects.get(pk=theirs.pk).launched_by == colleague
    _budget(team, owner, broke, "10")
    lifecycle.start(Instance.objects.with_related().get(pk=theirs.pk), by=broke)
    assert Instance.objects.get(pk=theirs.pk).launched_by == broke  # now theirs to pay from their budget


def test_a_launchs_data_disk_is_the_members_spend_and_the_notice_goes_once(
    catalog, instant, eager_tasks, team, owner, django_capture_on_commit_callbacks
):

    developer = _member(team, Role.DEVELOPER)
    _budget(team, owner, developer, "0.5")
    request = launching.LaunchRequest(name="big", chip="mlu370-x8", image="pytorch-2.2-neuware", data_disk_gb=2000)
    with pytest.raises(budgets.BudgetExceeded):  # ¥1.53 of compute and the disk's hour do not fit in ¥0.50
        launching.launch(team.account, request, by=developer)
    _budget(team, owner, developer, "3")
    with time_machine.travel(timezone.now(), tick=False) as clock:
        launching.launch(team.account, request, by=developer)
        settle()
        assert set(UsageSession.objects.filter(user=team.account).values_list("kind", "member_id")) == {
            ("instance", developer.pk),
            ("disk", developer.pk),
        }
        for _tick in range(5):  # the budget is reached, then the kept disk reaches it again at every tick
            clock.shift(timedelta(minutes=60))
            with django_capture_on_commit_callbacks(execute=True):
                metering.meter()
            settle()
        assert Instance.objects.get(name="big").status == Status.STOPPED
        assert Notification.objects.filter(kind="member_budget").count() == 2  # the member and the team, once


def test_the_teams_statement_shows_each_members_spend_and_each_resource_by_member(catalog, instant, team, owner):
    developer, reader = _member(team, Role.DEVELOPER), _member(team, Role.READ_ONLY)
    with time_machine.travel(timezone.now(), tick=False) as clock:
        _launch(team, developer, "dev-run")
        _launch(team, owner, "owner-run")
        settle()
        clock.shift(timedelta(minutes=60))
        metering.meter()
        spent = budgets.spent(team.account_id, [developer.pk, owner.pk])
        assert spent[developer.pk] > 0 and spent[owner.pk] > 0

        page = _browser(owner).get(reverse("billing:statements"))
        assert page.status_code == 200
        html = page.content.decode()
        assert 'id="statement-members"' in html
        assert "developer@example.com" in html and owner.email in html
        members = _token_client(owner).get("/api/v1/statements")  # a person's own: no members
        assert members.json()["members"] == []
        api = _browser(owner).get("/api/v1/statements")  # the console in the team's context
        by_member = {row["member"]: Decimal(row["charged"]) for row in api.json()["members"]}
        assert by_member == {developer.email: spent[developer.pk], owner.email: spent[owner.pk]}
        lines = {line["label"]: line["member"] for line in api.json()["lines"]}
        assert lines == {"dev-run": developer.email, "owner-run": owner.email}
        csv = _browser(owner).get(reverse("billing:statements"), {"format": "csv"}).content.decode()
        assert "Member" in csv.splitlines()[0] and "developer@example.com" in csv
    # A role without the billing permission does not read the team's statement.
    assert _browser(reader).get(reverse("billing:statements")).status_code == 403


def test_the_dashboard_in_a_teams_context_shows_the_teams_wallet_to_billing_roles_only(team, owner):
    developer = _member(team, Role.DEVELOPER)
    team_cash = wallet.summary(team.account).cash
    assert team_cash != wallet.summary(owner).cash

    billing_view = _browser(owner).get(reverse("console:dashboard")).content.decode()
    assert 'id="dashboard-wallet-owner"' in billing_view and "The wallet of 视觉实验室" in billing_view
    assert f"{team_cash:,.2f}" in billing_view
    developer_view = _browser(developer).get(reverse("console:dashboard")).content.decode()
    assert "Your own wallet. You are working in 视觉实验室" in developer_view
    assert f"{team_cash:,.2f}" not in developer_view


def test_the_team_log_says_the_new_budget_and_roles_by_name(team, owner):
    member = _member(team, Role.DEVELOPER, email="dev@example.com")
    _budget(team, owner, member, "500")
    services.invite(services.membership(owner, team.slug), "finance@example.com", Role.BILLING)
    page = _browser(owner).get(reverse("teams:detail", args=[team.slug])).content.decode()
    log = page.split('id="team-events"')[1].split("</ul>")[0]
    assert 'changed the monthly budget of dev@example.com <span class="text-secondary">(to ¥500.00 a month)' in log
    assert "(Billing)" in log and "(billing)" not in log
    chinese = _browser(owner)
    chinese.cookies["django_language"] = "zh-hans"
    log = chinese.get(reverse("teams:detail", args=[team.slug])).content.decode().split('id="team-events"')[1]
    assert 'dev@example.com <span class="text-secondary">（改为每月 ¥500.00）' in log
