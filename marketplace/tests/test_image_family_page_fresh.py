"""After the owner confirms another chip family for an imported image, the image's page shows that family at once
(its variants table, the family line and the launch offers), not the one it had before the change."""

import pytest
from django.conf import settings
from django.test import Client
from django.utils import timezone

from marketplace.choices import ImageReview
from marketplace.models import Image

pytestmark = pytest.mark.django_db


@pytest.fixture
def en(owner_client):
    owner_client.cookies[settings.LANGUAGE_COOKIE_NAME] = "en"
    return owner_client


def _family_line(html: str) -> str:
    line = html[html.index('id="image-family"') :]
    return line[: line.index("<span")]


def test_the_page_right_after_a_family_change_shows_the_new_family(en, owner, imported_image):
    image = imported_image(owner, "cuda")
    # Given the owner looked at the page once (what is the same for everyone is kept for a while)...
    before = en.get(image.get_absolute_url()).content.decode()
    assert "NVIDIA GPU (CUDA)" in _family_line(before)
    # ...when they confirm another family, the page they are sent back to says so.
    en.post(f"/marketplace/images/{image.slug}/family/", {"family": "npu"})
    after = en.get(image.get_absolute_url()).content.decode()
    assert "Ascend NPU (CANN)" in _family_line(after)
    assert 'data-family="cuda"' not in after  # no launch offer on the family it is no longer for


def test_a_listed_imported_images_page_shows_the_owners_form_to_the_owner_only(en, owner, stranger, imported_image):
    # The parts of an image's page that everyone sees alike are kept: the owner's form (and its CSRF token) is not.
    image = imported_image(owner, "cuda")
    Image.objects.filter(pk=image.pk).update(review_state=ImageReview.LISTED, updated_at=timezone.now())
    owners = en.get(image.get_absolute_url()).content.decode()
    assert 'id="family-form"' in owners
    other = Client()
    other.cookies[settings.LANGUAGE_COOKIE_NAME] = "en"
    other.force_login(stranger)
    strangers = other.get(image.get_absolute_url()).content.decode()
    assert 'id="image-family"' in strangers and 'id="family-form"' not in strangers
    assert 'id="family-form"' in en.get(image.get_absolute_url()).content.decode()
