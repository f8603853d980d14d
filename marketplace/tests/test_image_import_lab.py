"""An imported image's JupyterLab and ports on the embedded default: an image that has ``jupyter-lab`` gets the lab
button and its own JupyterLab started on the console's socket; one without gets no button; the ports its config
exposes are listed on the instance's page."""

import os

import pytest

from instances.choices import Status
from instances.models import Instance
from marketplace.choices import ImageStatus
from marketplace.images import imports
from marketplace.tests.registry_fixtures import PASSWORD, USER, build_image, push

pytestmark = [pytest.mark.sandbox, pytest.mark.django_db(transaction=True)]

# A stand-in for JupyterLab: it notes how it was started and stays up, as a server does.
FAKE_LAB = '#!/bin/sh\necho "$@" > /run/gpucloud/lab-args\nexec sleep 600\n'


def _executable_lab(root):
    os.chmod(root / "bin" / "jupyter-lab", 0o755)


@pytest.fixture(scope="session")
def lab_image(registry, tmp_path_factory):
    layout = build_image(
        tmp_path_factory.mktemp("lab"),
        {"/bin/jupyter-lab": FAKE_LAB},
        cmd=["/bin/sh", "-c", "sleep 600"],
        env=["PATH=/bin"],
        extra=_executable_lab,
        ports=("8080/tcp", "9000/tcp"),
    )
    return push(layout, registry, "team/lab:1")


def fresh(instance):
    return Instance.objects.with_related().get(pk=instance.pk)


@pytest.fixture
def imported(on_local, owner, settings, eager_tasks):
    settings.IMAGE_IMPORT_ROOT = on_local.root / "images"
    settings.IMAGE_IMPORT_ALLOW_LOOPBACK = True

    def run(reference):
        image = imports.start_import(owner, reference, username=USER, password=PASSWORD)
        image.refresh_from_db()
        assert image.status == ImageStatus.READY, image.status_detail
        return image.variants.get().slug

    return run


def test_an_image_with_jupyterlab_gets_the_lab_button_and_its_ports_listed(
    on_local, launch, owner_client, imported, lab_image
):
    instance = launch(image=imported(lab_image), no_card=True)
    on_local.settle(until=lambda: fresh(instance).status == Status.RUNNING, message="the machine to run")
    on_local.settle(
        until=lambda: on_local.run(fresh(instance), "cat /run/gpucloud/lab-args").returncode == 0,
        timeout=30,
        message="the image's JupyterLab to start",
    )
    started = on_local.run(fresh(instance), "cat /run/gpucloud/lab-args").stdout
    assert "--ServerApp.sock=/run/gpucloud/jupyter.sock" in started
    assert f"--ServerApp.base_url=/instances/{instance.public_id}/lab/" in started

    page = owner_client.get(instance.get_absolute_url()).content.decode()
    assert 'id="open-jupyterlab"' in page and 'id="sandbox-image"' in page
    ports = owner_client.get(f"{instance.get_absolute_url()}ports/").content.decode()
    assert 'id="image-ports"' in ports and ">8080<" in ports and ">9000<" in ports


def test_an_image_without_jupyterlab_gets_no_lab_button(on_local, launch, owner_client, imported, tiny_image):
    instance = launch(image=imported(tiny_image), no_card=True)
    on_local.settle(until=lambda: fresh(instance).status == Status.RUNNING, message="the machine to run")
    page = owner_client.get(instance.get_absolute_url()).content.decode()
    assert 'id="open-jupyterlab"' not in page and 'id="sandbox-image"' in page
