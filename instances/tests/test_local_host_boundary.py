"""What a machine's user cannot do on the host, tried from inside real machines and as their host users.

The agent runs outside the sandbox as the machine's host user: links and FIFOs the machine leaves where the agent
reads the training scalars and writes the checkpoint marker must lead it nowhere on the host and never stall it.
And that host user, outside its namespaces, must read nothing of the console's data folder: the database, users'
stored files, invoices, hub blobs.
"""

import base64
import json
import os
import shutil
import sqlite3
import subprocess
import tempfile
from pathlib import Path

import pytest
from django.core.management import call_command

from instances import lifecycle
from instances.backends import get_backend, local
from instances.choices import Status
from instances.models import Instance
from marketplace.hub import blobs, repos
from marketplace.models import HubItem
from storage import mounts
from storage.services import backend
from storage.tests.fixtures import store_file

pytestmark = [pytest.mark.sandbox, pytest.mark.django_db(transaction=True)]

HOST_SCALARS = '{"tag": "host-secret", "step": 1, "value": 42}\n'


def fresh(instance):
    return Instance.objects.with_related().get(pk=instance.pk)


@pytest.fixture
def running(on_local, launch):
    """A machine whose start command only sleeps (the quick-start script would write the scalars file itself)."""

    def run(**fields):
        fields.setdefault("chip", "ascend-910b")
        fields.setdefault("cards", 1)
        fields.setdefault("start_command", "sleep infinity")
        instance = launch(**fields)
        on_local.settle(until=lambda: fresh(instance).status == Status.RUNNING, message="the machine to run")
        return fresh(instance)

    return run


@pytest.fixture
def host_folder():
    """A folder of the host under /tmp (searchable by every user), removed afterwards."""
    folder = Path(tempfile.mkdtemp(prefix="gpucloud-host-", dir="/tmp"))
    os.chmod(folder, 0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def reports(instance) -> int:
    return fresh(instance).agent_reports.count()


def as_sandbox_user(instance, *argv) -> subprocess.CompletedProcess:
    """``argv`` run on the host (outside every namespace) as the machine's host user."""
    uid = local.sandbox_uid(instance)
    switch = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--inh-caps=-all", "--"]
    return subprocess.run([*switch, *argv], capture_output=True, text=True, cwd="/", check=False)


def test_a_link_at_the_scalars_file_charts_nothing_of_the_host(on_local, running, host_folder):
    # Given a host file of training scalars the machine's host user may read on the host, out of the machine's sight
    secret = host_folder / "scalars.jsonl"
    secret.write_text(HOST_SCALARS)
    os.chmod(secret, 0o644)
    instance = running()
    assert as_sandbox_user(instance, "cat", str(secret)).stdout == HOST_SCALARS

    # When the machine links its scalars file to it
    done = on_local.run(instance, f"test ! -e {secret} && ln -sfn {secret} /root/.gpucloud/scalars.jsonl")
    assert done.returncode == 0, done.stderr

    # Then heartbeats keep coming and the training chart shows nothing of the host's file
    seen = reports(instance)
    on_local.settle(until=lambda: reports(instance) >= seen + 3, timeout=30, message="three more heartbeats")
    assert "host-secret" not in get_backend("local").training_curves(fresh(instance))

    # And the machine's own scalars still reach the chart
    own = HOST_SCALARS.replace("host-secret", "loss").strip()
    on_local.run(instance, f"rm /root/.gpucloud/scalars.jsonl; echo '{own}' > /root/.gpucloud/scalars.jsonl")
    on_local.settle(
        until=lambda: "loss" in get_backend("local").training_curves(fresh(instance)), timeout=30, message="the curve"
    )


def test_a_link_at_the_checkpoint_marker_makes_a_stop_write_no_host_file(on_local, running, host_folder):
    # Given a host folder the machine's host user may write on the host, out of the machine's sight
    instance = running()
    uid = local.sandbox_uid(instance)
    os.chown(host_folder, uid, uid)

    # When the machine links the checkpoint marker (and the name it used to be staged at) into it, then is stopped
    done = on_local.run(
        instance,
        f"ln -s {host_folder}/marker.json /root/.gpucloud/checkpoint.json"
        f" && ln -s {host_folder}/staged.json /root/.gpucloud/checkpoint.tmp",
    )
    assert done.returncode == 0, done.stderr
    lifecycle.stop(fresh(instance))
    on_local.settle(until=lambda: fresh(instance).status == Status.STOPPED, message="the stop")

    # Then nothing was written on the host, and the machine's home has the marker
    assert list(host_folder.iterdir()) == []
    with on_local.stopped_home(instance) as home:
        marker = home / ".gpucloud" / "checkpoint.json"
        assert not marker.is_symlink() and json.loads(marker.read_text())["signal"] == "SIGUSR1"


def test_fifos_at_the_scalars_file_and_the_marker_stall_neither_heartbeats_nor_a_stop(on_local, running):
    instance = running()
    done = on_local.run(
        instance, "cd /root/.gpucloud && mkfifo scalars.jsonl checkpoint.json checkpoint.tmp && ls -l scalars.jsonl"
    )
    assert done.returncode == 0 and done.stdout.startswith("p"), done.stderr

    seen = reports(instance)
    on_local.settle(until=lambda: reports(instance) >= seen + 3, timeout=30, message="three more heartbeats")

    lifecycle.stop(fresh(instance))
    on_local.settle(until=lambda: fresh(instance).status == Status.STOPPED, message="the stop")
    with on_local.stopped_home(instance) as home:
        assert json.loads((home / ".gpucloud" / "checkpoint.json").read_text())["signal"] == "SIGUSR1"


# The data folder -------------------------------------------------------------------------------------------------


@pytest.fixture
def data_folder(settings, on_local):
    """A data folder of this test's own, as an older console left it (folders 0755, files 0644 — what the usual
    umask makes), under a folder every user may search, with the machines' sandbox root inside it."""
    parent = Path(tempfile.mkdtemp(prefix="gpucloud-data-", dir="/tmp"))
    os.chmod(parent, 0o755)
    data = parent / "var"
    media = data / "media"
    for folder in (data, media / "cloudstorage" / "old-user", media / "hub" / "ab", data / "uploads"):
        folder.mkdir(parents=True, exist_ok=True)
    old = {
        "database": data / "db.sqlite3",
        "stored file": media / "cloudstorage" / "old-user" / "old.txt",
        "hub blob": media / "hub" / "ab" / ("ab" + "0" * 62),
        "invoice": media / "cloudstorage" / "invoices" / "fapiao.pdf",
    }
    old["invoice"].parent.mkdir()
    for path in old.values():
        path.write_text("secret")
    for path in [data, *data.rglob("*")]:
        os.chmod(path, 0o755 if path.is_dir() else 0o644)

    settings.DATA_DIR, settings.MEDIA_ROOT, settings.STORAGE_STAGING_DIR = data, media, data / "uploads"
    stores = {}
    for name in ("cloudstorage", "hub"):  # the product's options (permissions among them), in this folder
        options = {**settings.STORAGES[name]["OPTIONS"], "location": str(media / name)}
        stores[name] = {**settings.STORAGES[name], "OPTIONS": options}
    settings.STORAGES = settings.STORAGES | stores
    settings.LOCAL_SANDBOX_ROOT = on_local.root = data / "sandboxes"
    on_local.cloud = media / "cloudstorage"  # unmounted at the end, and checked to be, with the rest
    settings.LOCAL_HUB_ROOT = data / "sandboxes" / "hub"
    # The same console moved to this folder: its uid range claimed in a registry of its own, so the claim of the
    # folder it came from (whose machines may still be stopping) is not another console's.
    settings.LOCAL_SANDBOX_UID_REGISTRY = parent / "uid-claims"
    yield old
    on_local.kill_all()  # the machines and their volumes first: never delete through a mount
    if not on_local.mounts():
        shutil.rmtree(parent, ignore_errors=True)


def test_a_sandbox_user_reads_nothing_of_the_data_folder_on_the_host(data_folder, on_local, running, owner):

    # Given a data folder made before it was kept private, made private by migrate (as every make run and deploy)
    call_command("migrate", verbosity=0)

    # and what the console writes there from now on: a database, a user's file, a private repository's blob
    database = sqlite3.connect(data_folder["database"].with_name("new.sqlite3"))
    database.execute("CREATE TABLE t (x)")
    database.close()
    entry = store_file(owner, "/private/weights.txt", b"the owner's own")
    repos.create_repo(owner, name="secret-model", organization="acme-private", private=True, kind="model")
    config = b'{"model_type": "private"}\n'
    content = {"path": "config.json", "content": base64.b64encode(config).decode(), "encoding": "base64"}
    lines = [json.dumps({"key": "header", "value": {"summary": "first"}}).encode()]
    lines.append(json.dumps({"key": "file", "value": content}).encode())
    repos.commit(owner, "model", "acme-private/secret-model", "main", iter(lines))
    blob = HubItem.objects.get(repo="acme-private/secret-model").head.files.get(path="config.json").blob

    # When the owner's machine runs with its sandbox root in that data folder (its host user walks down to it)
    instance = running()
    # Then the machine reads its owner's private repository where it is mounted, and nothing else
    mounts.mount(owner, instance, "acme-private/secret-model")
    seen = on_local.run(instance, "cat /root/public/acme-private/secret-model/config.json")
    assert seen.returncode == 0 and seen.stdout.encode() == config, seen.stderr

    # And its host user, outside every namespace, can open none of the data folder, nor list it
    private = {
        **data_folder,
        "new database": data_folder["database"].with_name("new.sqlite3"),
        "new stored file": Path(backend().path(entry.storage_key)),
        "new hub blob": Path(blobs.local_path(blob)),
    }
    for what, path in private.items():
        assert path.exists(), what
        denied = as_sandbox_user(instance, "cat", str(path))
        assert denied.returncode != 0 and "Permission denied" in denied.stderr, (what, path, denied)
    assert "Permission denied" in as_sandbox_user(instance, "ls", str(data_folder["database"].parent)).stderr
