"""POST /api/v1/images/import and DELETE /api/v1/images/{id}: the owner imports and removes, a read-only token and a
stranger cannot, the password never comes back, and the list shows imported images with what they hold."""

import pytest
from rest_framework.test import APIClient

from accounts import services as accounts
from marketplace.choices import ImageStatus
from marketplace.images import services
from marketplace.models import Image
from marketplace.tests.registry_fixtures import PASSWORD, USER
from teams import services as teams
from teams.models import Membership
from teams.roles import Role
from tests.fixtures.factories import UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def imported(owner_api, image_imports, tiny_image, eager_tasks, django_capture_on_commit_callbacks):
    """The tiny image imported by the owner through the API; returns the 201 body."""
    body = {"reference": tiny_image, "username": USER, "password": PASSWORD, "name": "Tiny"}
    with django_capture_on_commit_callbacks(execute=True):
        response = owner_api.post("/api/v1/images/import", body, format="json")
    assert response.status_code == 201, response.json()
    return response.json()


def test_an_import_is_listed_as_the_owners_with_what_it_holds(owner_api, imported):
    assert PASSWORD not in str(imported) and "password" not in imported["imported"]
    detail = owner_api.get(f"/api/v1/images/{imported['id']}").json()
    assert detail["status"] == ImageStatus.READY and detail["imported"]["step"] == "done"
    assert detail["imported"]["checks"]["shell"] is True
    assert "GREETING=hello-from-the-image" in detail["imported"]["config"]["env"]
    mine = owner_api.get("/api/v1/images", {"mine": "true"}).json()["results"]
    assert [row["slug"] for row in mine] == [imported["slug"]] and mine[0]["imported"]["reference"]


def test_strangers_and_read_only_tokens_neither_see_nor_remove_it(
    owner_api, stranger_api, teammate_api, anon_api, imported
):
    for client in (stranger_api, anon_api):
        assert client.get(f"/api/v1/images/{imported['id']}").status_code == 404
    assert stranger_api.delete(f"/api/v1/images/{imported['id']}").status_code == 404
    assert teammate_api.post("/api/v1/images/import", {"reference": "busybox"}, format="json").status_code == 403
    assert anon_api.post("/api/v1/images/import", {"reference": "busybox"}, format="json").status_code in (401, 403)
    assert owner_api.delete(f"/api/v1/images/{imported['id']}").status_code == 204
    assert owner_api.get(f"/api/v1/images/{imported['id']}").status_code == 404


def test_a_private_registry_and_a_bad_reference_are_400s_and_403s(owner_api, image_imports):
    response = owner_api.post("/api/v1/images/import", {"reference": "192.168.0.9:5000/x/y:1"}, format="json")
    assert response.status_code == 403 and response.json()["code"] == "registry_refused"
    response = owner_api.post("/api/v1/images/import", {"reference": "Not A Reference"}, format="json")
    assert response.status_code == 400 and response.json()["code"] == "invalid_reference"


def test_an_image_not_imported_cannot_be_removed_here(owner_api, owner, official_images):

    copy = services.clone_to_mine(owner, official_images["pytorch-2.2"])
    response = owner_api.delete(f"/api/v1/images/{copy.public_id}")
    assert response.status_code == 409 and response.json()["code"] == "not_imported"


def test_a_teams_read_only_member_imports_nothing_into_the_team(owner, image_imports):
    team = teams.create_team(owner, name="视觉实验室", slug="vision-lab")
    viewer = UserFactory(email="viewer@example.com")
    Membership.objects.create(team=team, user=viewer, role=Role.READ_ONLY)
    client = APIClient()
    token = accounts.create_api_token(viewer, name="t", scope="read_write", team=team).plaintext
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    body = {"reference": "registry.example.com/team/tiny:1", "name": "Tiny"}
    response = client.post("/api/v1/images/import", body, format="json")
    assert response.status_code == 403, response.json()
    assert not Image.objects.filter(owner=team.account).exists()
