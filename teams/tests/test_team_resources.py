"""A team's own instances and wallet: working in the team's context, launches the team pays for, what each role
may do with the team's instances, and the audit log of it."""

from decimal import Decimal

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from billing import wallet
from billing.models import TopUp
from core.errors import ServiceError
from instances.models import Instance
from instances.tests.fixtures import settle
from storage import disks
from teams import services
from teams.accounts import recipients
from teams.models import Membership, TeamEvent
from teams.roles import Role
from tests.fixtures.factories import UserFactory
from tests.fixtures.personas import _token_client

pytestmark = pytest.mark.django_db

FORM = {
    "chip": "ascend-910b",
    "cards": "1",
    "plan": "payg",
    "image": "pytorch-2.2-cann8",
    "name": "team-run",
    "term_end_action": "continue",
}


@pytest.fixture
def team(owner):
    return services.create_team(owner, name="视觉实验室", slug="vision-lab")


def _browser(user) -> Client:
    client = Client()
    client.cookies["django_language"] = "en"
    client.force_login(user)
    return client


def _member(team, role, email=None):
    user = UserFactory(email=email or f"{role}@example.com")
    Membership.objects.create(team=team, user=user, role=role)
    return user


def _work_in(client, slug):
    response = client.post(reverse("teams:switch"), {"team": slug})
    assert response.status_code == 302
    return response


def _top_up(client, amount):
    """The sandbox checkout, as a person pays it from the wallet page."""
    response = client.post(reverse("billing:topup"), {"amount": amount})
    assert response.status_code == 302, response.content.decode()[:500]
    paid = client.post(response["Location"], {"action": "pay"})
    assert paid.status_code == 302 and "/billing/topup/success/" in paid["Location"]


def test_a_developer_launches_in_the_team_and_the_team_wallet_pays(catalog, owner, team, instant):
    owner_client = _browser(owner)
    _work_in(owner_client, "vision-lab")
    _top_up(owner_client, "200")
    assert wallet.summary(team.account).cash == Decimal("200.00")
    assert wallet.summary(owner).cash == Decimal("0")  # the owner's own wallet is untouched
    assert TopUp.objects.get().user == team.account

    developer = _member(team, Role.DEVELOPER)
    client = _browser(developer)
    personal = client.post(reverse("instances:launch"), FORM)
    assert personal.status_code == 400  # nothing in the developer's own wallet
    assert "top up" in personal.content.decode().lower()

    switched = _work_in(client, "vision-lab")
    assert switched["Location"] == reverse("instances:list")
    page = client.get(reverse("instances:launch")).content.decode()
    assert 'id="team-launch-note"' in page and "视觉实验室" in page
    launched = client.post(reverse("instances:launch"), FORM)
    assert launched.status_code == 302
    instance = Instance.objects.get()
    assert instance.owner == team.account and instance.launched_by == developer

    team_list = client.get(reverse("instances:list")).content.decode()
    assert "team-run" in team_list and "Instances of 视觉实验室" in team_list
    detail = client.get(instance.get_absolute_url()).content.decode()
    assert "Belongs to 视觉实验室 · launched by developer@example.com" in detail

    _work_in(client, "")
    assert "team-run" not in client.get(reverse("instances:list")).content.decode()
    # The instance's own address works from any context, as the role allows.
    assert client.get(instance.get_absolute_url()).status_code == 200

    actions = list(TeamEvent.objects.filter(team=team).values_list("action", "actor__email", "subject"))
    assert ("launched", "developer@example.com", "team-run") in actions
    assert ("topup_started", "owner@example.com", "¥200.00") in actions


@pytest.mark.parametrize(
    "role, may_act",
    [(Role.OWNER, True), (Role.ADMIN, True), (Role.DEVELOPER, True), (Role.BILLING, False), (Role.READ_ONLY, False)],
)
def test_each_role_reads_the_team_instance_and_only_operators_stop_it(launch, team, role, may_act):
    instance = launch(user=team.account, name="shared-run")
    settle()
    member = team.memberships.get().user if role == Role.OWNER else _member(team, role)
    client = _browser(member)
    assert client.get(instance.get_absolute_url()).status_code == 200
    api = _token_client(member)
    assert api.get(f"/api/v1/instances/{instance.public_id}").status_code == 200

    stopped = client.post(reverse("instances:stop", args=[instance.public_id]))
    instance.refresh_from_db()
    if may_act:
        assert stopped.status_code == 302 and instance.wanted == "stopped"
        assert TeamEvent.objects.filter(action="stopped", actor=member, subject="shared-run").exists()
    else:
        assert stopped.status_code == 403
        assert "does not allow this" in stopped.content.decode()
        assert instance.wanted == "running"
        refused = api.post(f"/api/v1/instances/{instance.public_id}/stop")
        assert refused.status_code == 403 and refused.json()["code"] == "permission_denied"
        instance.refresh_from_db()
        assert instance.wanted == "running"


def test_a_member_who_leaves_loses_the_team_instances_at_once_and_they_stay(launch, team, owner):
    instance = launch(user=team.account, name="shared-run")
    developer = _member(team, Role.DEVELOPER)
    client = _browser(developer)
    _work_in(client, "vision-lab")
    assert client.get(instance.get_absolute_url()).status_code == 200

    member = services.membership(owner, "vision-lab")
    services.remove_member(member, str(developer.public_id))
    assert client.get(instance.get_absolute_url()).status_code == 404
    assert client.post(reverse("instances:stop", args=[instance.public_id])).status_code == 404
    listing = client.get(reverse("instances:list")).content.decode()
    assert "shared-run" not in listing and 'id="context-team"' not in listing  # back in the personal context
    assert Instance.objects.get(pk=instance.pk).owner == team.account  # the instance stays with the team


def test_another_team_and_strangers_never_reach_a_team_instance(launch, team, stranger):
    instance = launch(user=team.account, name="shared-run")
    other_owner = UserFactory(email="other-owner@example.com")
    other = services.create_team(other_owner, name="Other lab", slug="other-lab")
    for person in (stranger, other_owner, _member(other, Role.ADMIN)):
        client = _browser(person)
        assert client.get(instance.get_absolute_url()).status_code == 404
        assert client.post(reverse("instances:stop", args=[instance.public_id])).status_code == 404
        assert _token_client(person).get(f"/api/v1/instances/{instance.public_id}").status_code == 404
    # Nobody can switch into a team they are not in.
    assert _browser(stranger).post(reverse("teams:switch"), {"team": "vision-lab"}).status_code == 404


def test_the_team_wallet_is_for_the_billing_roles(team, owner):
    developer = _member(team, Role.DEVELOPER)
    billing = _member(team, Role.BILLING)
    client = _browser(developer)
    _work_in(client, "vision-lab")
    refused = client.get(reverse("billing:wallet"))
    assert refused.status_code == 403 and "does not allow this" in refused.content.decode()
    assert client.post(reverse("billing:topup"), {"amount": "50"}).status_code == 403
    assert not TopUp.objects.exists()

    client = _browser(billing)
    _work_in(client, "vision-lab")
    page = client.get(reverse("billing:wallet")).content.decode()
    assert "Wallet of 视觉实验室" in page
    _top_up(client, "50")
    assert wallet.summary(team.account).cash == Decimal("50.00")


def test_the_team_account_signs_nobody_in_and_its_mail_goes_to_the_billing_roles(client, team, owner):
    account = team.account
    assert not account.has_usable_password() and account.email.endswith("@teams.invalid")
    assert not client.login(email=account.email, password="")
    billing = _member(team, Role.BILLING)
    _member(team, Role.DEVELOPER)

    assert recipients(account) == [owner.email, billing.email]
    assert recipients(owner) == [owner.email]


def test_the_context_switch_goes_back_only_to_this_site(team, owner):
    client = _browser(owner)
    response = client.post(reverse("teams:switch"), {"team": "vision-lab", "next": "https://evil.example/"})
    assert response["Location"] == reverse("instances:list")
    response = client.post(reverse("teams:switch"), {"team": "", "next": "/billing/"})
    assert response["Location"] == "/billing/"


def test_the_list_costs_one_query_more_in_a_team_context_however_many_instances(launch, team, owner):

    def queries(client) -> int:
        with CaptureQueriesContext(connection) as captured:
            page = client.get(reverse("instances:list"))
        assert page.status_code == 200
        return len(captured.captured_queries), page.content.decode()

    client = _browser(owner)
    for n in range(2):
        launch(user=owner, name=f"mine-{n}")
        launch(user=team.account, name=f"team-{n}")
    personal, _html = queries(client)
    _work_in(client, "vision-lab")
    in_team, html = queries(client)
    assert in_team == personal + 1  # the membership behind the context, read once for the whole page
    assert "team-1" in html and "mine-1" not in html
    for n in range(2, 8):
        launch(user=team.account, name=f"team-{n}")
    more, html = queries(client)
    assert more == in_team and "team-7" in html


def test_a_member_mixes_nothing_of_their_own_into_a_team_instance(launch, team, owner):

    instance = launch(user=team.account, name="shared-run")
    settle()
    developer = _member(team, Role.DEVELOPER)
    launch(user=developer, name="mine")  # funds the developer, so the disk below is theirs to pay
    disk = disks.create(developer, name="my-data", size_gb=20, zone=instance.zone)
    with pytest.raises(ServiceError) as refused:
        disks.attach(developer, disk.public_id, instance.public_id)
    assert refused.value.code == "other_account"
    assert [i.name for i in disks.attachable_instances(developer, disk)] == ["mine"]
    # The team's machine mounts the team's folder, never the member's own (other members can enter it).
    rows = _token_client(developer).get(f"/api/v1/instances/{instance.public_id}/mounts").json()
    assert [row["target"] for row in rows] == ["/root/shared-team"]
