"""`gpucloud images show|family|ls|rm` with an imported image, and a launch of it on another family's card, against
a real HTTP server."""

import pytest

from marketplace.models import Image, ImageImport

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def cli(cli, lifecycle):
    """The shared ``cli`` (``tests.fixtures.services``), with the machines' simulated lifecycle these tests need."""
    return cli


def test_confirm_the_family_list_and_remove_an_imported_image(cli, owner, imported_image):
    image = imported_image(owner, "cuda")
    code, out, err = cli(owner, "images", "show", image.slug)
    assert code == 0, err
    assert "chip family: cuda (not confirmed yet)" in out

    code, out, err = cli(owner, "images", "family", image.slug, "dcu")
    assert code == 0, err
    assert f"{image.slug} is for dcu" in out and image.variants.get().family == "dcu"
    assert "chip family: dcu (confirmed)" in cli(owner, "images", "show", image.slug)[1]
    assert image.slug in cli(owner, "images", "ls", "--mine")[1]

    code, out, err = cli(owner, "images", "rm", image.slug)
    assert code == 0, err
    assert not Image.objects.filter(pk=image.pk).exists()


def test_a_stranger_can_neither_confirm_nor_remove_it(cli, owner, stranger, imported_image):
    image = imported_image(owner, "cuda")
    code, _out, err = cli(stranger, "images", "family", image.slug, "npu")
    assert code != 0 and "404" in err
    code, _out, err = cli(stranger, "images", "rm", image.slug)
    assert code != 0 and "404" in err
    assert image.variants.get().family == "cuda"


def test_launching_it_on_another_familys_card_prints_a_warning(cli, owner, imported_image):
    variant = imported_image(owner, "cuda").variants.get().slug
    code, out, err = cli(owner, "instances", "create", "--name", "x", "--chip", "ascend-910b", "--image", variant)
    assert code == 0, err
    assert "warning: This image is built for NVIDIA GPU (CUDA)" in err


def test_without_a_family_the_suggested_one_is_confirmed(cli, owner, imported_image):
    image = imported_image(owner, "npu")
    code, out, err = cli(owner, "images", "family", image.slug)
    assert code == 0, err
    assert f"{image.slug} is for npu" in out and ImageImport.objects.get(image=image).family_confirmed
