"""The community-image queue in the back office, over the marketplace's review service: ops approves an image
(it is listed in the marketplace) or rejects it with a reason; each decision is audited."""

import pytest
from django.urls import reverse

from accounts.ops.choices import AuditAction
from accounts.ops.models import AuditEntry
from marketplace.images import services as image_services

pytestmark = pytest.mark.django_db


@pytest.fixture
def pending_image(owner, official_images):

    official = next(iter(official_images.values()))
    mine = image_services.clone_to_mine(owner, official, name="Kunpeng fraud detector")
    return image_services.publish(owner, mine)


def test_ops_approves_a_community_image_and_it_is_listed_in_the_marketplace(client, ops_user, pending_image):
    client.force_login(ops_user)
    assert "Kunpeng fraud detector" in client.get(reverse("ops:reviews")).content.decode()

    response = client.post(reverse("ops:review-image", args=[pending_image.public_id]), {"decision": "approve"})

    assert response.status_code == 302
    pending_image.refresh_from_db()
    assert pending_image.review_state == "listed"
    assert "Kunpeng fraud detector" in client.get(reverse("marketplace:list")).content.decode()
    entry = AuditEntry.objects.get()
    assert entry.action == AuditAction.IMAGE_APPROVED and entry.after["review_state"] == "listed"


def test_a_rejection_needs_a_reason_and_keeps_the_image_out_of_the_marketplace(client, ops_user, pending_image):
    client.force_login(ops_user)
    client.post(reverse("ops:review-image", args=[pending_image.public_id]), {"decision": "reject"})
    pending_image.refresh_from_db()
    assert pending_image.review_state == "pending" and not AuditEntry.objects.exists()

    client.post(
        reverse("ops:review-image", args=[pending_image.public_id]),
        {"decision": "reject", "reason": "The README promises a licence it does not ship."},
    )
    pending_image.refresh_from_db()
    assert pending_image.review_state == "rejected"
    assert AuditEntry.objects.get().reason == "The README promises a licence it does not ship."


def test_finance_cannot_review_images(client, finance_user, pending_image):
    client.force_login(finance_user)
    response = client.post(reverse("ops:review-image", args=[pending_image.public_id]), {"decision": "approve"})
    assert response.status_code == 403
    pending_image.refresh_from_db()
    assert pending_image.review_state == "pending"
