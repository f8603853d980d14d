"""Removing an imported image while a launch boots from it: the launch either is seen by the removal (which refuses)
or finds the image gone (and creates nothing) — never an instance booting from a deleted image."""

import threading

import pytest
from django.db import connection

from core.errors import Conflict, NotFound
from instances import launching
from instances.models import Instance
from marketplace.choices import ImageStatus
from marketplace.images import imports, oci
from marketplace.models import Image
from marketplace.tests.registry_fixtures import PASSWORD, USER


def _imported(owner, tiny_image) -> Image:
    image = imports.start_import(owner, tiny_image, username=USER, password=PASSWORD)
    imports.run_import(image.pk)
    image.refresh_from_db()
    assert image.status == ImageStatus.READY, image.status_detail
    return image


def test_an_image_removed_after_the_launch_checked_it_is_not_booted(
    owner, image_imports, tiny_image, lifecycle, launch, monkeypatch
):
    # Given an imported image, removed by its owner right after a launch has checked that the image may boot
    image = _imported(owner, tiny_image)
    slug = image.variants.get().slug
    checked = launching._check_shutdown

    def removed_meanwhile(*args):
        imports.remove_image(owner, Image.objects.get(pk=image.pk))
        return checked(*args)

    monkeypatch.setattr(launching, "_check_shutdown", removed_meanwhile)

    # When the launch goes on, then it is refused as for an unknown image, and nothing boots from the removed one
    with pytest.raises(NotFound) as refused:
        launch(image=slug, no_card=True)
    assert refused.value.code == "unknown_image"
    assert not Instance.objects.filter(image=slug).exists()
    assert not Image.objects.filter(pk=image.pk).exists()


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_removal_waits_for_a_launch_that_holds_the_image_and_then_refuses(
    owner, image_imports, tiny_image, lifecycle, eager_tasks, monkeypatch
):
    # Given an imported image, and a launch of it paused inside its transaction once it holds the image
    image = _imported(owner, tiny_image)
    slug = image.variants.get().slug
    held, removal_started = threading.Event(), threading.Event()
    checked = launching._check_secrets_kept_apart

    def pause(*args):
        held.set()
        removal_started.wait(10)
        threading.Event().wait(1)  # time for a removal that does not wait to delete the image
        return checked(*args)

    monkeypatch.setattr(launching, "_check_secrets_kept_apart", pause)
    outcomes = {}

    def run(name, work):
        try:
            outcomes[name] = work()
        except Exception as exc:  # noqa: BLE001 (the test reads what each thread came to)
            outcomes[name] = exc
        finally:
            connection.close()

    def remove():
        held.wait(10)
        removal_started.set()
        return imports.remove_image(owner, Image.objects.get(pk=image.pk))

    request = launching.LaunchRequest(name="boots-it", image=slug, no_card=True)
    threads = [
        threading.Thread(target=run, args=("launch", lambda: launching.launch(owner, request))),
        threading.Thread(target=run, args=("remove", remove)),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)

    # Then the launch made its machine, and the removal, which waited for it, refused: the image and its files stay
    assert isinstance(outcomes["launch"], Instance), outcomes["launch"]
    assert isinstance(outcomes["remove"], Conflict) and outcomes["remove"].code == "image_in_use", outcomes["remove"]
    assert Image.objects.filter(pk=image.pk).exists()
    assert oci.rootfs_of(image.imported.tag).exists()
