"""API tokens issued for a team: the API acts in that team (its instances, its wallet) from the token's scope alone,
reaches nothing personal, and stops working for the team the moment the person leaves it."""

import uuid
from decimal import Decimal

import pytest
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from accounts.models import ApiToken
from billing import wallet
from instances.models import Instance
from instances.tests.fixtures import settle
from marketplace.hub import services as hub
from teams import services
from teams.models import Membership
from teams.roles import Role
from tests.fixtures.catalog import load_hub
from tests.fixtures.factories import UserFactory
from tests.fixtures.personas import _token_client

pytestmark = pytest.mark.django_db

LAUNCH = {"name": "from-ci", "chip": "mlu370-x8", "image": "pytorch-2.2-neuware"}


@pytest.fixture
def team(owner):
    team = services.create_team(owner, name="视觉实验室", slug="vision-lab")
    wallet.adjust_balance(
        user=team.account, amount=Decimal("300"), reason="test", staff=None, idempotency_key=str(uuid.uuid4())
    )
    return team


def _team_client(user, slug="vision-lab", scope="read_write"):
    answer = _token_client(user).post("/api/v1/tokens", {"name": "ci", "scope": scope, "team": slug}, format="json")
    assert answer.status_code == 201, answer.content
    assert answer.json()["team"] == slug
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {answer.json()['token']}", HTTP_ACCEPT_LANGUAGE="en")
    return client


def test_a_team_token_launches_lists_and_pays_in_the_team_and_reaches_nothing_personal(
    catalog, instant, launch, team, owner
):
    personal = launch(user=owner, name="my-own")
    api = _team_client(owner)
    made = api.post("/api/v1/instances", LAUNCH, format="json")
    assert made.status_code == 201, made.content
    instance = Instance.objects.get(public_id=made.json()["id"])
    assert instance.owner == team.account and instance.launched_by == owner

    names = [row["name"] for row in api.get("/api/v1/instances").json()["results"]]
    assert names == ["from-ci"]
    assert api.get(f"/api/v1/instances/{personal.public_id}").status_code == 404
    assert api.get(f"/api/v1/instances/{instance.public_id}").status_code == 200
    team_cash = wallet.summary(team.account).cash
    assert Decimal(api.get("/api/v1/wallet").json()["cash"]) == team_cash != wallet.summary(owner).cash

    refused = api.get("/api/v1/ssh-keys")  # a person's own keys: not the team's
    assert refused.status_code == 403 and "for a team" in refused.json()["message"]
    # The personal token is unchanged: the person's own list, the team's instance by its id.
    mine = _token_client(owner)
    assert [row["name"] for row in mine.get("/api/v1/instances").json()["results"]] == ["my-own"]
    assert mine.get(f"/api/v1/instances/{instance.public_id}").status_code == 200


def test_a_team_token_does_what_the_role_allows_and_nothing_after_leaving(catalog, instant, launch, team, owner):
    developer = UserFactory(email="dev@example.com")
    Membership.objects.create(team=team, user=developer, role=Role.DEVELOPER)
    reader = UserFactory(email="reader@example.com")
    Membership.objects.create(team=team, user=reader, role=Role.READ_ONLY)
    running = launch(user=team.account, name="shared")
    settle()

    dev_api = _team_client(developer)
    wallet_refused = dev_api.get("/api/v1/wallet")
    assert wallet_refused.status_code == 403 and wallet_refused.json()["code"] == "permission_denied"
    read_api = _team_client(reader)
    assert read_api.get(f"/api/v1/instances/{running.public_id}").status_code == 200
    assert read_api.post("/api/v1/instances", LAUNCH, format="json").status_code == 403
    assert read_api.post(f"/api/v1/instances/{running.public_id}/stop").status_code == 403

    services.remove_member(services.membership(owner, "vision-lab"), str(developer.public_id))
    gone = dev_api.get("/api/v1/instances")
    assert gone.status_code == 401 and "no longer a member" in gone.json()["message"]
    for method, path in [
        ("get", f"/api/v1/instances/{running.public_id}"),
        ("get", "/api/v1/teams/vision-lab"),
        ("post", f"/api/v1/instances/{running.public_id}/stop"),
        ("get", "/api/v1/hub"),
    ]:
        assert getattr(dev_api, method)(path).status_code == 401, path
    assert Instance.objects.get(pk=running.pk).wanted == "running"


def test_a_team_token_reaches_its_own_team_only(team, owner, catalog):

    other = services.create_team(owner, name="Other lab", slug="other-lab")
    load_hub()
    hub.save_item(repo="owner-lab/secret-model", owner=owner, visibility="private")
    api = _team_client(owner)
    assert api.get("/api/v1/teams/vision-lab").status_code == 200
    assert api.get("/api/v1/teams/other-lab").status_code == 404
    member_url = f"/api/v1/teams/other-lab/members/{owner.public_id}"
    assert api.patch(member_url, {"monthly_budget": "1"}, format="json").status_code == 404
    invite = api.post("/api/v1/teams/other-lab/invitations", {"email": "x@example.com", "role": "owner"}, format="json")
    assert invite.status_code == 404 and not other.invitations.exists()
    assert api.get("/api/v1/teams").status_code == 403  # the person's teams are not the team's business
    assert api.post("/api/v1/teams", {"name": "New", "slug": "new-lab"}, format="json").status_code == 403
    # Public routes that show a token's person more (private hub items) refuse a team's token.
    assert api.get("/api/v1/hub").status_code == 403
    assert api.get("/api/v1/hub/owner-lab/secret-model").status_code == 403
    assert _token_client(owner).get("/api/v1/hub/owner-lab/secret-model").status_code == 200


def test_a_token_is_issued_only_for_ones_own_team(team, owner, stranger):
    answer = _token_client(stranger).post(
        "/api/v1/tokens", {"name": "x", "scope": "read", "team": "vision-lab"}, format="json"
    )
    assert answer.status_code == 404 and answer.json()["code"] == "invalid_team"
    odd = _token_client(owner).post("/api/v1/tokens", {"name": "x", "scope": "read", "team": ["a"]}, format="json")
    assert odd.status_code == 400
    assert not ApiToken.objects.filter(team__isnull=False).exists()


def test_the_token_page_issues_a_team_token(team, owner):
    client = Client()
    client.cookies["django_language"] = "en"
    client.force_login(owner)
    page = client.get(reverse("console:tokens")).content.decode()
    assert 'value="vision-lab"' in page and "Me (personal)" in page
    made = client.post(reverse("console:tokens"), {"name": "lab ci", "scope": "read", "team": "vision-lab"})
    assert made.status_code == 200 and 'id="token-secret"' in made.content.decode()
    assert ApiToken.objects.get(name="lab ci").team == team
    bad = client.post(reverse("console:tokens"), {"name": "x", "scope": "read", "team": "other-lab"})
    assert bad.status_code == 400 and "Choose yourself or one of your teams." in bad.content.decode()
