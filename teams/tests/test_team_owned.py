"""What a team owns besides its instances: cloud disks, inference endpoints, images and the team's folder of cloud
storage (mounted in its machines at /root/shared-team). Each is made in the team's context (the console's switch, or
a team's API token), paid by the team's wallet out of the member's budget, and reached by members as their role
allows; a stranger or a former member finds nothing."""

from decimal import Decimal

import pytest
from django.test import Client
from django.urls import reverse

from billing import budgets
from billing.models import UsageSession
from catalog.services import get_zone
from inference import services as endpoints
from inference.models import EndpointKey
from inference.tests.fixtures import fund
from instances.models import Instance, SimulatedJob
from instances.tests.fixtures import settle
from marketplace.images import services as images
from marketplace.models import Image
from storage import disks, quota
from storage.models import CloudDisk, Entry
from storage.tests.fixtures import tus_upload
from teams import services
from teams.models import Membership, TeamEvent
from teams.roles import Role
from teams.tests.test_team_tokens import _team_client
from tests.fixtures.factories import UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def team(owner):
    return services.create_team(owner, name="视觉实验室", slug="vision-lab")


def _member(team, role, email=None):
    user = UserFactory(email=email or f"{role}@example.com")
    Membership.objects.create(team=team, user=user, role=role)
    return user


def _browser(user, team_slug=None) -> Client:
    client = Client()
    client.cookies["django_language"] = "en"
    client.force_login(user)
    if team_slug:
        assert client.post(reverse("teams:switch"), {"team": team_slug}).status_code == 302
    return client


def test_a_disk_made_in_the_teams_context_is_the_teams_and_members_reach_it_by_role(catalog, team, owner):
    fund(team.account)
    developer, reader = _member(team, Role.DEVELOPER), _member(team, Role.READ_ONLY)
    stranger = UserFactory(email="stranger@example.com")

    made = _browser(developer, "vision-lab").post(
        reverse("storage:disk-create"), {"name": "team-data", "size_gb": "50", "zone": "cn-east-xc"}
    )
    assert made.status_code == 302, made.content.decode()[:500]
    disk = CloudDisk.objects.get(name="team-data")
    assert disk.owner == team.account
    # The team's wallet pays for it, out of the developer's budget.
    session = UsageSession.objects.get(resource_id=disk.public_id)
    assert session.user_id == team.account.pk and session.member_id == developer.pk

    # Listed in the team's context, for every member; not among anyone's own disks.
    assert "team-data" in _browser(reader, "vision-lab").get(reverse("storage:disks")).content.decode()
    assert "team-data" not in _browser(developer).get(reverse("storage:disks")).content.decode()
    assert [row["name"] for row in _team_client(reader).get("/api/v1/disks").json()["results"]] == ["team-data"]
    # A reader may not change it; a stranger and a former member do not find it.
    grow = reverse("storage:disk-grow", args=[disk.public_id])
    assert _browser(reader, "vision-lab").post(grow, {"size_gb": "60"}).status_code == 403
    assert _browser(stranger).post(grow, {"size_gb": "60"}).status_code == 404
    assert _browser(developer).post(grow, {"size_gb": "60"}).status_code == 302  # by its address, in any context
    assert CloudDisk.objects.get(pk=disk.pk).size_gb == 60
    Membership.objects.filter(user=developer).delete()
    assert _browser(developer).post(grow, {"size_gb": "70"}).status_code == 404
    assert CloudDisk.objects.get(pk=disk.pk).size_gb == 60


def test_a_team_disk_is_refused_past_the_members_budget_and_nothing_is_made(catalog, team, owner):
    fund(team.account)
    developer = _member(team, Role.DEVELOPER)
    billing_member = Membership.objects.get(user=owner, team=team)
    services.set_budget(billing_member, developer.public_id, "0.01")

    api = _team_client(developer)
    answer = api.post("/api/v1/disks", {"name": "too-big", "size_gb": 500, "zone": "cn-east-xc"}, format="json")
    assert answer.status_code == 402 and answer.json()["code"] == "budget_exceeded"
    assert "monthly budget" in answer.json()["message"]
    assert not CloudDisk.objects.filter(name="too-big").exists()
    assert not UsageSession.objects.filter(user=team.account).exists()


def test_an_endpoint_deployed_with_a_teams_token_is_the_teams(deploy, team, owner):
    fund(team.account)
    developer, reader = _member(team, Role.DEVELOPER), _member(team, Role.READ_ONLY)
    stranger = UserFactory(email="stranger@example.com")

    made = _team_client(developer).post("/api/v1/endpoints", {"template": "qwen2.5-0.5b-instruct-vllm"}, format="json")
    assert made.status_code == 201, made.content
    assert made.json()["key"].startswith("sk-")
    settle()
    endpoint = endpoints.get_endpoint(owner, made.json()["id"])
    assert endpoint.instance.owner == team.account and endpoint.instance.launched_by == developer
    assert TeamEvent.objects.filter(team=team, actor=developer, action=TeamEvent.Action.LAUNCHED).exists()

    # The team's members list it in the team's context; it is nobody's own.
    assert [e["id"] for e in _team_client(reader).get("/api/v1/endpoints").json()] == [made.json()["id"]]
    assert _browser(developer).get(reverse("endpoints:list")).content.decode().count(str(endpoint.public_id)) == 0
    assert str(endpoint.public_id) in _browser(reader, "vision-lab").get(reverse("endpoints:list")).content.decode()
    # A reader sees it and may not stop it; a stranger gets the 404 of a missing one.
    stop = f"/api/v1/endpoints/{endpoint.public_id}/stop"
    assert _team_client(reader).get(f"/api/v1/endpoints/{endpoint.public_id}").status_code == 200
    refused = _team_client(reader).post(stop)
    assert refused.status_code == 403 and refused.json()["code"] == "permission_denied"
    assert _browser(stranger).post(reverse("endpoints:stop", args=[endpoint.public_id])).status_code == 404
    assert Instance.objects.get(pk=endpoint.instance.pk).status == "running"
    assert _team_client(developer).post(stop).status_code == 202
    assert Instance.objects.get(pk=endpoint.instance.pk).status in {"stopping", "stopped"}


def test_the_teams_cloud_storage_is_a_folder_of_its_own(cloud_storage, team, owner):
    fund(team.account)  # cloud storage is paid from cash at the price list's storage price
    developer, reader = _member(team, Role.DEVELOPER), _member(team, Role.READ_ONLY)
    dev = _browser(developer, "vision-lab")

    assert dev.post(reverse("storage:create-folder"), {"name": "datasets"}).status_code == 302
    folder = Entry.objects.get(name="datasets")
    assert folder.owner == team.account
    # The console's own uploads (tus over the session) land in the folder of the context.
    assert tus_upload(dev, b"x" * 1000, "labels.csv", folder="/datasets").status_code == 204
    assert Entry.objects.get(name="labels.csv").owner == team.account

    reader_page = _browser(reader, "vision-lab").get(reverse("storage:index")).content.decode()
    assert "datasets" in reader_page
    assert "datasets" not in _browser(developer).get(reverse("storage:index")).content.decode()  # one's own folder
    listed = _team_client(reader).get("/api/v1/storage/entries", {"path": "/datasets"}).json()["results"]
    assert [row["name"] for row in listed] == ["labels.csv"]
    # A reader may read, not write; personally, the developer's folder is untouched.
    assert _browser(reader, "vision-lab").post(reverse("storage:create-folder"), {"name": "x"}).status_code == 403
    refused = _team_client(reader).post("/api/v1/storage/folders", {"path": "/x"}, format="json")
    assert refused.status_code == 403
    assert not Entry.objects.filter(owner=developer).exists()
    assert not Entry.objects.filter(name="x").exists()


def test_a_teams_machine_mounts_the_teams_folder_at_shared_team(launch, team, owner):
    personal = launch(name="mine")
    shared = launch(user=team.account, name="team-run")
    settle()
    mounts = {job.instance_id: job.mounts for job in SimulatedJob.objects.all()}
    assert f"cloudstorage/{owner.public_id}:/root/shared" in mounts[personal.public_id]
    assert mounts[shared.public_id][0] == f"cloudstorage/{team.account.public_id}:/root/shared-team"
    assert not any(m.endswith(":/root/shared") for m in mounts[shared.public_id])

    browser = _browser(owner)
    panel_url = f"/storage/instances/{shared.public_id}/attachments/"
    assert f'hx-get="{panel_url}"' in browser.get(shared.get_absolute_url()).content.decode()
    panel = browser.get(panel_url).content.decode()
    assert "/root/shared-team" in panel and "the team's cloud storage" in panel


def test_an_image_saved_from_a_teams_instance_is_private_to_the_team(launch, team, owner):
    developer, reader = _member(team, Role.DEVELOPER), _member(team, Role.READ_ONLY)
    stranger = UserFactory(email="stranger@example.com")
    instance = launch(user=team.account, name="team-run")
    settle()
    api = _team_client(developer)
    assert api.post(f"/api/v1/instances/{instance.public_id}/stop").status_code in {200, 202}
    settle()

    page = _browser(developer).get(instance.get_absolute_url()).content.decode()
    assert 'id="save-image-link"' in page
    saved = api.post("/api/v1/images", {"instance": str(instance.public_id), "name": "团队镜像"}, format="json")
    assert saved.status_code == 201, saved.content
    image = Image.objects.get(public_id=saved.json()["id"])
    assert image.owner == team.account and image.publisher == "视觉实验室"
    assert saved.json()["mine"] is True

    # Every member sees it (in the team's "my images" too); a stranger gets the 404 of a missing one.
    assert images.get_image(reader, image.slug).pk == image.pk
    assert image.slug in _browser(reader, "vision-lab").get(reverse("marketplace:my-images")).content.decode()
    assert image.slug not in _browser(reader).get(reverse("marketplace:my-images")).content.decode()
    assert _browser(stranger).get(image.get_absolute_url()).status_code == 404
    # Only those who may operate the team's things change it.
    with pytest.raises(Exception) as refused:
        images.publish(reader, image)
    assert getattr(refused.value, "status", None) in {403, 404}
    Membership.objects.filter(user=reader).delete()
    assert _browser(reader).get(image.get_absolute_url()).status_code == 404


def test_the_member_who_grows_a_team_disk_pays_for_it_from_then_on_within_their_budget(catalog, team, owner):
    fund(team.account)
    developer, colleague = _member(team, Role.DEVELOPER), _member(team, Role.ADMIN, "colleague@example.com")
    disk = disks.create(team.account, name="grows", size_gb=20, zone=get_zone("cn-east-xc"), by=developer)
    grown = disks.grow(developer, disk.public_id, 40)
    assert grown.size_gb == 40
    sessions = UsageSession.objects.filter(resource_id=disk.public_id).order_by("pk")
    assert [s.member_id for s in sessions] == [developer.pk, developer.pk]
    assert sessions.last().payable_per_hour > sessions.first().payable_per_hour > Decimal(0)

    # A colleague without the budget for the whole disk cannot grow it onto anyone's budget.
    services.set_budget(Membership.objects.get(user=owner, team=team), colleague.public_id, "0.01")
    with pytest.raises(budgets.BudgetExceeded):
        disks.grow(colleague, disk.public_id, 60)
    assert CloudDisk.objects.get(pk=disk.pk).size_gb == 40
    services.set_budget(Membership.objects.get(user=owner, team=team), colleague.public_id, "")
    disks.grow(colleague, disk.public_id, 60)
    assert UsageSession.objects.filter(resource_id=disk.public_id).order_by("pk").last().member_id == colleague.pk


def test_a_team_has_no_free_storage_tier_of_its_own(team, owner):

    assert quota.usage(owner).free > 0
    assert quota.usage(team.account).free == 0  # the free tier is per person: more teams add no free space


def test_the_endpoint_keys_a_member_made_stop_working_when_they_leave_or_stop_operating(deploy, team, owner):

    fund(team.account)
    developer, admin = _member(team, Role.DEVELOPER), _member(team, Role.ADMIN, "admin@example.com")
    endpoint = endpoints.deploy(team.account, endpoints.DeployRequest(template="qwen2.5-0.5b-instruct-vllm"), by=admin)
    settle()
    made = _team_client(developer).post(f"/api/v1/endpoints/{endpoint.public_id}/keys", {"name": "dev"}, format="json")
    assert made.status_code == 201
    kept = endpoints.create_key(endpoint, name="team", by=admin)
    page = _browser(admin).get(reverse("endpoints:detail", args=[endpoint.public_id])).content.decode()
    assert "developer@example.com" in page  # whose key it is

    services.change_role(Membership.objects.get(user=owner, team=team), developer.public_id, Role.READ_ONLY)
    dev_key = EndpointKey.objects.get(name="dev")
    assert dev_key.revoked_at is not None
    assert EndpointKey.objects.get(pk=kept.key.pk).revoked_at is None  # the others' keys keep working

    another = endpoints.create_key(endpoint, name="admin-2", by=admin)
    services.remove_member(Membership.objects.get(user=owner, team=team), str(admin.public_id))
    assert EndpointKey.objects.get(pk=another.key.pk).revoked_at is not None
