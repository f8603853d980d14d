"""Image marketplace fixtures, registered from the root conftest.

``catalog`` is extended here: instances boot marketplace image variants (``instances.images``), so every test that
loads the catalog (chips, zones, prices) also gets the official images, as ``make run`` loads them.
"""

import pytest
from django.contrib.auth.models import Group

from accounts.ops import roles
from marketplace.images import catalog as images_catalog
from marketplace.images import services
from marketplace.models import Image
from tests.fixtures.factories import UserFactory


@pytest.fixture
def catalog(catalog):
    """The catalog (tests/fixtures/catalog.py) plus the official image catalogue."""
    images_catalog.load()
    return catalog


@pytest.fixture
def official_images(catalog):
    """slug → the official image."""
    return {image.slug: image for image in Image.objects.filter(owner__isnull=True)}


@pytest.fixture
def staff(db):
    """Staff in the ops group: the role that reviews images (``accounts.ops.roles.REVIEW_IMAGE``)."""

    roles.sync_groups()  # transactional tests flush the groups the migration made
    user = UserFactory(email="staff@example.com", is_staff=True)
    user.groups.add(Group.objects.get(name=roles.OPS))
    return user


@pytest.fixture
def community_image(owner, official_images, staff):
    """``community_image(user=owner, listed=True, **fields)``: a user's image cloned from the PyTorch image, then
    (when ``listed``) published and approved by staff — as the pages and the API do it."""

    def make(user=None, *, listed=True, base="pytorch-2.2", name="Team PyTorch"):
        image = services.clone_to_mine(user or owner, official_images[base], name=name)
        if listed:
            image = services.publish(user or owner, image)
            image = services.review_image(image, True, "", staff)
        return image

    return make
