"""``/api/v1/notifications``: channels CRUD, the test send, the delivery log, the in-console list — tried as the
owner, a stranger and team members of each role."""

import pytest
from rest_framework.test import APIClient

from accounts import services as console
from billing import arrears
from billing.choices import NotificationKind
from notifications import services
from notifications.choices import ChannelKind
from notifications.models import Channel
from notifications.services import ChannelSpec

pytestmark = pytest.mark.django_db(transaction=True)
CHANNELS = "/api/v1/notifications/channels"


def _api(user, team=None, scope="read_write"):
    client = APIClient()
    token = console.create_api_token(user, name="t", scope=scope, team=team).plaintext
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}", HTTP_ACCEPT_LANGUAGE="en")
    return client


def test_the_owner_adds_lists_changes_tests_and_deletes_a_channel(owner, receiver):
    api = _api(owner)
    created = api.post(
        CHANNELS, {"kind": "webhook", "name": "ops", "url": receiver.url(), "secret": "s3"}, format="json"
    )
    assert created.status_code == 201, created.json()
    channel = created.json()
    assert channel["has_secret"] is True and "secret" not in channel and channel["events"] == []

    assert [c["id"] for c in api.get(CHANNELS).json()["results"]] == [channel["id"]]

    changed = api.patch(f"{CHANNELS}/{channel['id']}", {"events": ["arrears"], "enabled": False}, format="json")
    assert changed.status_code == 200 and changed.json()["events"] == ["arrears"] and not changed.json()["enabled"]
    assert Channel.objects.get().secret == "s3"  # a PATCH without a secret keeps it

    tested = api.post(f"{CHANNELS}/{channel['id']}/test")
    assert tested.status_code == 200 and tested.json()["status"] == "sent" and tested.json()["response_code"] == 200
    log = api.get(f"{CHANNELS}/{channel['id']}/deliveries").json()["results"]
    assert [(d["event"], d["status"], d["response_code"]) for d in log] == [("test", "sent", 200)]

    assert api.delete(f"{CHANNELS}/{channel['id']}").status_code == 204
    assert not Channel.objects.exists()


def test_a_private_url_is_a_400_naming_the_field(owner):
    response = _api(owner).post(
        CHANNELS, {"kind": "webhook", "name": "x", "url": "https://10.0.0.1/h", "secret": "s"}, format="json"
    )
    assert response.status_code == 400
    assert "url" in response.json()["errors"]


def test_strict_types_refuse_a_number_for_a_name(owner):
    response = _api(owner).post(CHANNELS, {"kind": "email", "name": 5, "email": "a@example.com"}, format="json")
    assert response.status_code == 400


def test_another_users_channel_is_a_404_for_every_method(owner, stranger):
    channel = services.create_channel(owner, ChannelSpec(kind=ChannelKind.EMAIL, name="mine", email="me@example.com"))
    api = _api(stranger)
    base = f"{CHANNELS}/{channel.public_id}"
    assert api.get(CHANNELS).json()["results"] == []
    assert api.get(base).status_code == 404
    assert api.patch(base, {"name": "x"}, format="json").status_code == 404
    assert api.delete(base).status_code == 404
    assert api.post(f"{base}/test").status_code == 404
    assert api.get(f"{base}/deliveries").status_code == 404
    assert Channel.objects.get().name == "mine"


def test_a_team_admin_manages_the_teams_channels_and_a_developer_only_sees_them(team, member, receiver):
    admin, developer = member("admin"), member("developer")
    created = _api(admin, team).post(
        CHANNELS, {"kind": "feishu", "name": "team bot", "url": receiver.url()}, format="json"
    )
    assert created.status_code == 201
    channel = Channel.objects.get()
    assert channel.owner == team.account

    dev = _api(developer, team)
    assert [c["name"] for c in dev.get(CHANNELS).json()["results"]] == ["team bot"]
    assert (
        dev.post(CHANNELS, {"kind": "email", "name": "x", "email": "x@example.com"}, format="json").status_code == 403
    )
    assert dev.patch(f"{CHANNELS}/{channel.public_id}", {"name": "x"}, format="json").status_code == 403
    assert dev.delete(f"{CHANNELS}/{channel.public_id}").status_code == 403
    assert dev.post(f"{CHANNELS}/{channel.public_id}/test").status_code == 403
    # The developer's personal token sees nothing of the team's.
    assert _api(developer).get(CHANNELS).json()["results"] == []


def test_a_teams_notification_goes_to_the_teams_channels(team, member, receiver):
    services.create_channel(
        team.account, ChannelSpec(kind=ChannelKind.WEBHOOK, secret="s", name="team", url=receiver.url())
    )
    arrears.notify(
        team.account_id, NotificationKind.MEMBER_BUDGET, budget="100", team=team.name, member="m@example.com"
    )
    assert len(receiver.requests) == 1


def test_the_in_console_notifications_are_listed(owner, stranger):
    arrears.notify(owner.pk, NotificationKind.ARREARS, days=15)
    listed = _api(owner).get("/api/v1/notifications").json()["results"]
    assert [n["kind"] for n in listed] == ["arrears"] and listed[0]["message"]
    assert _api(stranger).get("/api/v1/notifications").json()["results"] == []


def test_the_schema_documents_the_endpoints(owner):
    schema = _api(owner).get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    paths = set(schema["paths"])
    assert {"/api/v1/notifications/channels/", "/api/v1/notifications/channels/{public_id}/test/"} <= paths
