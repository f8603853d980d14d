"""The image review queue is for staff with the review role only; everyone else gets 404, like /ops/. Every way
to review (the page, the API, the admin) checks the role in the service and writes one audit row."""

import pytest
from rest_framework.test import APIClient

from accounts.ops.choices import AuditAction
from accounts.ops.models import AuditEntry
from marketplace.images import services
from marketplace.models import Image

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("url", ["/marketplace/review/", "/marketplace/review/any-slug/"])
def test_non_staff_get_404_on_the_review_queue(client, owner, url):
    assert client.get(url).status_code == 404  # anonymous: no login redirect that advertises the page
    client.force_login(owner)
    method = client.post if url.endswith("any-slug/") else client.get
    assert method(url).status_code == 404


@pytest.fixture
def pending(owner, community_image):
    return services.publish(owner, community_image(listed=False, name="Waiting image"))


@pytest.fixture
def api():
    return APIClient()


@pytest.mark.parametrize("persona", ["finance_user", "plain_staff"])
def test_staff_without_the_review_role_cannot_review_anywhere(request, client, api, pending, persona):
    user = request.getfixturevalue(persona)
    client.force_login(user)
    assert client.get("/marketplace/review/").status_code == 403
    assert client.post(f"/marketplace/review/{pending.slug}/", {"decision": "approve"}).status_code == 403
    api.force_authenticate(user)
    refused = api.post(f"/api/v1/images/{pending.slug}/review", {"approve": True}, format="json")
    assert refused.status_code == 403 and refused.json()["code"] == "permission_denied"
    with pytest.raises(services.ServiceError) as direct:
        services.review_image(pending, True, "", user)
    assert direct.value.status == 403
    assert Image.objects.get(pk=pending.pk).review_state == "pending"
    assert not AuditEntry.objects.exists()


def test_a_review_through_the_api_is_audited_once(api, ops_user, pending):
    api.force_authenticate(ops_user)
    response = api.post(
        f"/api/v1/images/{pending.slug}/review",
        {"approve": False, "reason": "No licence"},
        format="json",
        REMOTE_ADDR="10.1.2.3",
    )
    assert response.status_code == 200, response.json()
    assert response.json()["review_state"] == "rejected"
    entry = AuditEntry.objects.get()
    assert (entry.actor, entry.action, entry.target_id) == (
        ops_user,
        AuditAction.IMAGE_REJECTED,
        str(pending.public_id),
    )
    assert entry.reason == "No licence" and entry.ip == "10.1.2.3"
    assert entry.before == {"review_state": "pending"} and entry.after["review_state"] == "rejected"


def test_a_review_on_the_marketplace_page_and_in_the_admin_is_audited(
    client, ops_user, superuser, owner, pending, community_image
):
    client.force_login(ops_user)
    assert client.post(f"/marketplace/review/{pending.slug}/", {"decision": "approve"}).status_code == 302
    assert Image.objects.get(pk=pending.pk).review_state == "listed"
    other = services.publish(owner, community_image(listed=False, name="Second image"))
    client.force_login(superuser)
    client.post("/admin/marketplace/image/", {"action": "approve_selected", "_selected_action": [other.pk]})
    assert Image.objects.get(pk=other.pk).review_state == "listed"
    entries = AuditEntry.objects.order_by("pk")
    assert [(e.actor, e.action, e.target_id) for e in entries] == [
        (ops_user, AuditAction.IMAGE_APPROVED, str(pending.public_id)),
        (superuser, AuditAction.IMAGE_APPROVED, str(other.public_id)),
    ]
