"""Leaving a checkout: the cancel link Stripe sends the browser back to only shows the top-up; cancelling it is a
POST with a CSRF token, so a link, a prefetch or an image tag can never cancel anyone's top-up."""

import pytest
from django.test import Client

from billing import payments
from billing.models import TopUp

pytestmark = pytest.mark.django_db


@pytest.fixture
def pending(owner):
    return payments.start_topup(owner, "50", base_url="http://testserver/")


def _url(topup) -> str:
    return f"/billing/topup/cancel/?topup={topup.public_id}"


def test_opening_the_cancel_link_changes_nothing_and_offers_a_cancel_button(owner_client, pending):
    owner_client.cookies["django_language"] = "en"

    response = owner_client.get(_url(pending))

    assert response.status_code == 200
    pending.refresh_from_db()
    assert pending.status == "pending"
    html = response.content.decode()
    assert 'method="post"' in html and "csrfmiddlewaretoken" in html and 'id="topup-cancel-button"' in html
    assert "Top-up cancelled" not in html


def test_posting_the_cancel_form_cancels_the_top_up_and_says_so(owner_client, pending):
    owner_client.cookies["django_language"] = "en"

    response = owner_client.post(_url(pending), follow=True)

    assert response.status_code == 200
    pending.refresh_from_db()
    assert pending.status == "cancelled"
    assert "Top-up cancelled" in response.content.decode()


def test_a_cancel_post_without_a_csrf_token_changes_nothing(owner, pending):
    client = Client(enforce_csrf_checks=True)
    client.force_login(owner)

    response = client.post(_url(pending))

    assert response.status_code == 403
    pending.refresh_from_db()
    assert pending.status == "pending"


def test_a_stranger_cannot_cancel_someone_elses_top_up(client, stranger, pending):
    client.force_login(stranger)

    assert client.get(_url(pending)).status_code == 404
    assert client.post(_url(pending)).status_code == 404
    assert TopUp.objects.get(pk=pending.pk).status == "pending"
