"""An imported image's JupyterLab and ports on the embedded default: an image that has ``jupyter-lab`` gets the lab
button and its own JupyterLab started on the console's socket; one without gets no button; the ports its config
exposes are listed on the instance's page."""

import os
import re
import time

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
    (root / "bin" / "httpd").symlink_to("busybox")


# The image's CMD: a web app listening on 8080 (busybox's httpd, in the foreground).
SERVES_8080 = [
    "/bin/sh",
    "-c",
    "mkdir -p /tmp/www && echo hello > /tmp/www/index.html && exec httpd -f -p 8080 -h /tmp/www",
]


@pytest.fixture(scope="session")
def lab_image(registry, tmp_path_factory):
    """An image with its own JupyterLab but no jupyter-server-proxy beside it."""
    layout = build_image(
        tmp_path_factory.mktemp("lab"),
        {"/bin/jupyter-lab": FAKE_LAB},
        cmd=SERVES_8080,
        env=["PATH=/bin"],
        extra=_executable_lab,
        ports=("8080/tcp", "9000/tcp"),
    )
    return push(layout, registry, "team/lab:1")


@pytest.fixture(scope="session")
def lab_proxy_image(registry, tmp_path_factory):
    """An image whose JupyterLab (/opt/conda/bin/jupyter-lab) has jupyter-server-proxy in its site-packages."""

    def add(root):
        (root / "bin" / "httpd").symlink_to("busybox")
        os.chmod(root / "opt" / "conda" / "bin" / "jupyter-lab", 0o755)

    files = {
        "/opt/conda/bin/jupyter-lab": FAKE_LAB,
        "/opt/conda/lib/python3.12/site-packages/jupyter_server_proxy/__init__.py": "",
    }
    layout = build_image(
        tmp_path_factory.mktemp("lab-proxy"), files, cmd=SERVES_8080, env=["PATH=/opt/conda/bin:/bin"], extra=add
    )
    return push(layout, registry, "team/lab-proxy:1")


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
    # What listens is listed, but with no button: this lab has no jupyter-server-proxy to open it through
    ports = _listening(owner_client, instance, 8080)
    assert 'id="ports-without-proxy"' in ports and "ssh -L" in ports
    assert "lab/proxy/" not in ports and 'id="open-port-form"' not in ports
    assert ">9000<" in ports  # declared by the image, not listening yet
    refused = owner_client.get(f"{instance.get_absolute_url()}ports/open/?port=8080", follow=True)
    assert "lab/proxy/" not in refused.redirect_chain[-1][0]
    assert "jupyter-server-proxy" in refused.content.decode()  # why, in the page's language


def _listening(client, instance, port: int) -> str:
    """The port panel once ``port`` is seen listening inside (not only declared by the image)."""
    url, deadline = f"{instance.get_absolute_url()}ports/", time.monotonic() + 30
    seen = re.compile(rf'class="[^"]*(listening-port|open-port)[^"]*"[^>]*>[^<]*\b{port}<')
    while time.monotonic() < deadline:
        page = client.get(url).content.decode()
        if seen.search(page):
            return page
        time.sleep(0.3)
    raise AssertionError(f"port {port} was never seen listening: {page}")


def test_an_image_whose_lab_has_jupyter_server_proxy_gets_a_button_per_port(
    on_local, launch, owner_client, imported, lab_proxy_image
):
    instance = launch(image=imported(lab_proxy_image), no_card=True)
    on_local.settle(until=lambda: fresh(instance).status == Status.RUNNING, message="the machine to run")
    ports = _listening(owner_client, instance, 8080)
    assert f'href="{instance.get_absolute_url()}lab/proxy/8080/"' in ports and 'id="open-port-form"' in ports
    assert 'id="ports-without-proxy"' not in ports


def test_an_image_without_jupyterlab_gets_no_lab_button(on_local, launch, owner_client, imported, tiny_image):
    instance = launch(image=imported(tiny_image), no_card=True)
    on_local.settle(until=lambda: fresh(instance).status == Status.RUNNING, message="the machine to run")
    page = owner_client.get(instance.get_absolute_url()).content.decode()
    assert 'id="open-jupyterlab"' not in page and 'id="sandbox-image"' in page
