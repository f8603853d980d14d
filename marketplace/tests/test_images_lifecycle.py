"""Save a stopped instance as a private image, publish it, staff review it, and ratings from users who ran it."""

import pytest
from django.conf import settings

from core.errors import Conflict, ServiceError
from instances import lifecycle
from instances.models import Instance
from instances.tests.fixtures import settle
from marketplace.images import services
from marketplace.models import Image, ImageRating

pytestmark = pytest.mark.django_db


def fresh(instance):
    return Instance.objects.with_related().get(pk=instance.pk)


@pytest.fixture
def stopped(launch):
    instance = launch(chip="ascend-910b", image="mindspore-2.3-cann8", name="to-save")
    settle()
    lifecycle.stop(fresh(instance))
    settle()
    return fresh(instance)


def _run(launch, user, image_slug, chip="ascend-910b"):
    instance = launch(user=user, chip=chip, image=image_slug, name="runner")
    settle()
    assert fresh(instance).status == "running"
    return instance


def test_saving_a_stopped_instance_shows_the_size_then_snapshots_in_a_task(
    owner_client, owner, stopped, eager_tasks, django_capture_on_commit_callbacks
):
    owner_client.cookies[settings.LANGUAGE_COOKIE_NAME] = "en"
    page = owner_client.get(f"/marketplace/save/{stopped.public_id}/").content.decode()
    size = services.snapshot_size(owner, stopped.public_id)
    assert 'id="snapshot-size"' in page and "GB" in page and "simulated" in page
    with django_capture_on_commit_callbacks(execute=True):
        response = owner_client.post(f"/marketplace/save/{stopped.public_id}/", {"name": "My tuned MindSpore"})
    image = Image.objects.get(owner=owner)
    assert response.status_code == 302 and response["Location"] == image.get_absolute_url()
    assert image.status == "ready" and image.size_bytes == size and image.review_state == "draft"
    variant = image.variants.get()
    assert variant.family == "npu" and "MindSpore 2.3" in variant.stack and variant.size_bytes == size
    assert [(e.old, e.new) for e in image.events.all()] == [("", "saving"), ("saving", "ready")]
    # and the owner can boot it now: the wizard offers it for the 910B
    assert variant.slug in owner_client.get("/instances/new/", {"chip": "ascend-910b"}).content.decode()


def test_the_snapshot_task_is_idempotent_and_fails_clearly_when_the_instance_moved(owner, stopped):
    image = services.save_instance_as_image(owner, stopped.public_id, name="Twice")
    assert services.complete_snapshot(image.pk) == "ready"
    assert services.complete_snapshot(image.pk) is None  # a retried task changes nothing
    second = services.save_instance_as_image(owner, stopped.public_id, name="Moved")
    lifecycle.start(fresh(stopped))
    assert services.complete_snapshot(second.pk) == "failed"
    assert "started or released" in Image.objects.get(pk=second.pk).status_detail


def test_only_a_stopped_instance_of_ones_own_can_be_saved(owner, stranger, launch, owner_client):
    running = launch(name="busy")
    settle()
    with pytest.raises(Conflict):
        services.save_instance_as_image(owner, running.public_id, name="x")
    with pytest.raises(ServiceError) as missing:
        services.save_instance_as_image(stranger, running.public_id, name="x")
    assert missing.value.status == 404
    assert owner_client.get(f"/marketplace/save/{running.public_id}/").status_code == 409
    assert not Image.objects.filter(owner__isnull=False).exists()


def test_publish_review_and_listing(owner, stranger, staff, stopped):
    image = services.save_instance_as_image(owner, stopped.public_id, name="Tuned")
    with pytest.raises(Conflict):
        services.publish(owner, image)  # still saving
    services.complete_snapshot(image.pk)
    image = services.publish(owner, Image.objects.get(pk=image.pk))
    assert image.review_state == "pending" and not Image.objects.for_user(stranger).filter(pk=image.pk).exists()
    with pytest.raises(ServiceError) as refused:
        services.review_image(image, True, "", by=stranger)
    assert refused.value.status == 403
    with pytest.raises(ServiceError) as refused:
        services.review_image(image, False, "  ", by=staff)
    assert refused.value.code == "reason_required"
    image = services.review_image(image, True, "", by=staff)
    assert image.review_state == "listed" and image.reviewed_by == staff
    assert Image.objects.for_user(stranger).filter(pk=image.pk).exists()
    with pytest.raises(Conflict):
        services.review_image(image, False, "changed my mind", by=staff)


def test_a_rating_from_a_user_who_never_ran_the_image_is_refused(stranger, official_images, stranger_api):
    image = official_images["magicmind-1.10"]
    with pytest.raises(ServiceError) as refused:
        services.rate(stranger, image, 5, "great")
    assert refused.value.code == "not_ran" and refused.value.status == 403
    response = stranger_api.post("/api/v1/images/magicmind-1.10/ratings", {"stars": 5}, format="json")
    assert response.status_code == 403 and response.json()["code"] == "not_ran"
    assert not ImageRating.objects.exists()


def test_users_who_ran_an_image_rate_it_once_and_the_average_follows(owner, stranger, launch, official_images):
    image = official_images["magicmind-1.10"]
    _run(launch, owner, "magicmind-1.10", chip="mlu370-x8")
    _run(launch, stranger, "magicmind-1.10", chip="mlu370-x8")
    services.rate(owner, image, 5, "fast")
    services.rate(stranger, image, 2, "")
    services.rate(stranger, image, 4, "better after the update")  # replaces the first
    image.refresh_from_db()
    assert (image.rating_count, str(image.rating_average)) == (2, "4.50")
    for stars in (0, 6, "5", True):
        with pytest.raises(ServiceError):
            services.rate(owner, image, stars)


def test_an_author_cannot_rate_their_own_image(owner, launch, community_image):
    image = community_image(listed=False, base="mindspore-2.3")
    _run(launch, owner, f"{image.slug}-npu")
    with pytest.raises(ServiceError) as refused:
        services.rate(owner, image, 5)
    assert refused.value.code == "own_image"
