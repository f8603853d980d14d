"""End to end on the embedded default: a tiny image built in the test (busybox, a marker file, a CMD and an env) is
pushed to the tests' password-protected registry on the loopback, imported by reference, and launched as a machine:
its files are the machine's root, its CMD is the start command with its env, and the host is out of sight."""

import pytest

from instances.backends import get_backend
from instances.choices import Status
from instances.models import Instance
from marketplace.choices import ImageStatus
from marketplace.images import imports
from marketplace.tests.registry_fixtures import MARKER, PASSWORD, USER

pytestmark = [pytest.mark.sandbox, pytest.mark.django_db(transaction=True)]


def fresh(instance):
    return Instance.objects.with_related().get(pk=instance.pk)


def test_an_imported_image_boots_as_the_machine_with_its_files_command_and_env(
    on_local, launch, owner, settings, tiny_image, eager_tasks
):
    # Given the tiny image imported by reference into the sandbox root (which sandbox users can walk to)
    settings.IMAGE_IMPORT_ROOT = on_local.root / "images"
    settings.IMAGE_IMPORT_ALLOW_LOOPBACK = True
    image = imports.start_import(owner, tiny_image, username=USER, password=PASSWORD)
    image.refresh_from_db()
    assert image.status == ImageStatus.READY, image.status_detail
    variant = image.variants.get()

    # When it is launched on the local backend
    instance = launch(image=variant.slug, no_card=True)
    on_local.settle(until=lambda: fresh(instance).status == Status.RUNNING, message="the machine to run")
    instance = fresh(instance)

    # Then the image's files are its root, its CMD ran as the start command with its env, and the host is hidden
    # The image's /etc/ld.so.preload and LD_PRELOAD never reach the dynamic loader the host's programs run through
    # inside (it would complain of the missing library on every start), and read as nothing.
    shell = on_local.run(instance, 'cat /marker; echo "preload=[$(cat /etc/ld.so.preload 2>/dev/null)] $LD_PRELOAD"')
    assert shell.stdout == MARKER + "preload=[] \n", shell.stdout
    assert shell.stderr == "", shell.stderr
    backend = get_backend("local")
    on_local.settle(
        until=lambda: "tiny image started" in backend.logs(fresh(instance), tail=20),
        timeout=30,
        message="the image's command",
    )
    assert "GREETING=hello-from-the-image" in backend.logs(fresh(instance), tail=20)
    listing = on_local.run(instance, "ls /; ls /usr 2>&1; cat /etc/hostname")
    assert "marker" in listing.stdout and "No such file" in listing.stdout  # the image has no /usr; the host's not here
    assert f"gpu-{instance.public_id.hex[:8]}" in listing.stdout
    assert "GREETING=hello-from-the-image" in on_local.run(instance, "env").stdout
    # Nothing of the host's beyond what every machine has: no /etc/passwd (the image has none), and the registry
    # listening on the host's loopback is out of reach (the machine's 127.0.0.1 is its own).
    assert on_local.run(instance, "cat /etc/passwd").returncode != 0
    port = tiny_image.split("/")[0].split(":")[1]
    reach = on_local.run(instance, f"busybox wget -q -T 3 -O - http://127.0.0.1:{port}/v2/; echo rc=$?")
    assert "rc=0" not in reach.stdout
    # Setuid bits would be no use inside: the image's files were made safe at import, and the root is read-only.
    assert on_local.run(instance, "echo x > /marker").returncode != 0
