"""The image review queue is for staff with the review role only; everyone else gets 404, like /ops/."""

import pytest

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("url", ["/marketplace/review/", "/marketplace/review/any-slug/"])
def test_non_staff_get_404_on_the_review_queue(client, owner, url):
    assert client.get(url).status_code == 404  # anonymous: no login redirect that advertises the page
    client.force_login(owner)
    method = client.post if url.endswith("any-slug/") else client.get
    assert method(url).status_code == 404
