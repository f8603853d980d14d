"""Tenants kept apart on Slurm: each owner's jobs run as their own unix account, whose folders and the files its
agent writes are its alone; where a zone's jobs share one account, secrets are refused at launch and the instance
page says the machine is shared. The last test runs on the real local cluster (``scripts/slurm-local.sh start``)."""

import json
import os
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from django.urls import reverse

from catalog.models import Node
from instances import secrets
from instances.backends import BackendError, get_backend, local_image, slurm_image
from instances.backends.slurm import Account, SlurmBackend, _make_private, find_account, job_phase, jupyter_token
from instances.choices import Status
from instances.models import Instance
from instances.tests.slurm_fixtures import _delete_accounts

API = "/api/v1/instances"
VALUE = "hf_S3cr3t-VALUE-7f9c"
AGENT = Path(__file__).resolve().parents[2] / "agent" / "gpucloud_agent.py"


@pytest.fixture
def hf_token(owner):
    secrets.put_secret(owner, "HF_TOKEN", VALUE)
    return "HF_TOKEN"


@pytest.fixture
def shared_slurm_zone(settings, lifecycle):
    """The Xinchuang zone's MLU370 nodes on Slurm, every job as the one shared account."""
    settings.SLURM = {**settings.SLURM, "job_user_template": ""}
    Node.objects.filter(zone__slug="cn-east-xc", chip__slug="mlu370-x8").update(backend_name="slurm")


BODY = {"name": "with-secret", "image": "pytorch-2.2-neuware", "chip": "mlu370-x8"}


# Shared account: no secrets, and the page says so ------------------------------------------------------------------


@pytest.mark.django_db
def test_a_launch_with_secrets_on_a_shared_slurm_account_is_refused_in_the_users_language(
    owner_api, shared_slurm_zone, hf_token
):
    response = owner_api.post(API, BODY | {"secrets": [hf_token]}, format="json", HTTP_ACCEPT_LANGUAGE="en")
    assert response.status_code == 400
    assert response.json()["code"] == "secrets_on_shared_account"
    assert "one shared unix account" in response.json()["errors"]["secrets"][0]

    chinese = owner_api.post(API, BODY | {"secrets": [hf_token]}, format="json", HTTP_ACCEPT_LANGUAGE="zh-hans")
    assert chinese.status_code == 400 and "共用" in chinese.json()["message"]
    assert not Instance.objects.exists()
    assert sum(Node.objects.values_list("cards_reserved", flat=True)) == 0  # nothing was reserved

    # Without secrets the same launch goes ahead
    assert owner_api.post(API, BODY | {"env": {"EPOCHS": "3"}}, format="json").status_code == 201


@pytest.mark.django_db
def test_the_wizard_shows_the_refusal_beside_the_secrets(owner_client, settings, shared_slurm_zone, hf_token):
    owner_client.cookies[settings.LANGUAGE_COOKIE_NAME] = "en"
    form = {
        "chip": "mlu370-x8",
        "cards": "1",
        "plan": "payg",
        "image": "pytorch-2.2-neuware",
        "name": "from-page",
        "term_end_action": "continue",
        "secrets": [hf_token],
    }
    response = owner_client.post(reverse("instances:launch"), form)
    assert response.status_code == 400 and "one shared unix account" in response.content.decode()
    assert not Instance.objects.exists()


@pytest.mark.django_db
def test_a_shared_account_job_never_gets_secrets_even_when_the_instance_names_some(
    launch, hf_token, settings, tmp_path
):
    # Given an instance launched with a secret (per-owner accounts then) whose zone has since moved to a shared one
    instance = launch(chip="mlu370-x8", image="pytorch-2.2-neuware", secrets=[hf_token])
    settings.SLURM = {**settings.SLURM, "root": str(tmp_path), "job_user_template": ""}
    backend = SlurmBackend()
    # When its job is described, it is refused with the reason
    with pytest.raises(BackendError, match="one shared unix account"):
        backend.job_description(instance, backend.config(instance))


@pytest.mark.django_db
def test_the_page_says_when_the_machine_runs_as_a_shared_account(owner_client, settings, launch):
    owner_client.cookies[settings.LANGUAGE_COOKIE_NAME] = "en"
    instance = launch(chip="mlu370-x8", image="pytorch-2.2-neuware")
    job = {"job_id": 31, "job_state": "RUNNING", "batch_host": "localhost", "start_time": 1, "comment": ""}
    common = {"wanted": "running", "reported": True, "grace": 10, "cards": 2, "chip": "MLU370", "spot_partition": "s"}
    for shared, shown in [(True, True), (False, False)]:
        access = job_phase(job, **common, shared=shared).access
        Instance.objects.filter(pk=instance.pk).update(status="running", backend_name="slurm", access=access)
        page = owner_client.get(instance.get_absolute_url()).content.decode()
        assert ('id="shared-account"' in page) is shown
        assert ("code on the cluster can read this instance" in page) is shown
        api = owner_client.get(f"{API}/{instance.public_id}").json()
        assert api["access"]["shared_account"] is shared


# Per-owner accounts: the agent's files and the console's folders ----------------------------------------------------


def test_a_private_agent_keeps_its_files_to_the_account_and_the_workload_gets_the_usual_umask(tmp_path):
    env = {"PATH": os.environ["PATH"], "SLURM_JOB_ID": "42", "HF_TOKEN": VALUE}
    workload = ["/bin/sh", "-c", "echo hi > made-by-workload; mkdir dir-by-workload"]
    command = [
        sys.executable,
        str(AGENT),
        "--instance",
        "abc",
        "--root",
        str(tmp_path),
        "--family",
        "cpu",
        "--interval",
        "60",
        "--private",
        "--",
        *workload,
    ]
    assert subprocess.run(command, env=env, timeout=30, check=False).returncode == 0

    system = tmp_path / "instances" / "abc"
    mode = lambda path: path.stat().st_mode & 0o777  # noqa: E731
    assert mode(system) == 0o700 and mode(system / "root") == 0o700
    assert mode(system / ".gpucloud") == 0o700 and mode(system / ".gpucloud" / "environment") == 0o600
    assert VALUE in (system / ".gpucloud" / "environment").read_text()
    assert mode(system / "root" / "made-by-workload") == 0o644 and mode(system / "root" / "dir-by-workload") == 0o755


@pytest.fixture
def nobodys_root(settings):
    """A Slurm root the account ``nobody`` can reach (pytest's own temporary folders are root's alone), with every
    owner's jobs running as ``nobody``: an account every host has, so the test creates none."""
    if os.geteuid() != 0 or find_account("nobody") is None:
        pytest.skip("handing folders to another account needs root and the account nobody")
    root = Path(tempfile.mkdtemp(prefix="gpucloud-accounts-", dir="/var/tmp"))
    root.chmod(0o755)
    settings.SLURM = {**settings.SLURM, "root": str(root), "job_user_template": "nobody"}
    yield root
    subprocess.run(["rm", "-rf", "--one-file-system", str(root)], check=True)


class Stub:
    public_id = "5b6f4a3e-0000-4000-8000-00000000000a"
    zone = type("Zone", (), {"slug": "cn-east-xc"})()
    backend_job_id = ""
    owner_id = 7


def test_the_accounts_system_disk_disks_and_storage_are_its_alone_and_its_links_are_its_own(nobodys_root):
    backend, instance, nobody = SlurmBackend(), Stub(), find_account("nobody")
    disk = "0b8e3c1e-5d2a-4b43-9d7e-3f3f0c9a1b2c"
    backend.mount(instance, "cloudstorage/u-1", "/root/shared")
    backend.attach_disk(instance, disk, 1, name="ckpt")

    system = nobodys_root / "instances" / instance.public_id
    for folder in (system, nobodys_root / "disks" / disk, nobodys_root / "shared" / "u-1"):
        info = folder.stat()
        assert (info.st_uid, info.st_mode & 0o777) == (nobody.uid, 0o700), folder
    # The links and the layout were made by the account itself
    link = system / "root" / "data" / "ckpt"
    assert os.readlink(link) == str(nobodys_root / "disks" / disk) and link.lstat().st_uid == nobody.uid
    layout = system / ".gpucloud" / "layout.json"
    assert json.loads(layout.read_text())["disks"] == [{"id": disk, "folder": "ckpt"}]
    assert layout.stat().st_uid == nobody.uid

    # A layout the account rewrote to lead elsewhere is never a path the console hands over, and the account's own
    # tools drop what is malformed in it rather than follow it
    escapes = ["../../../../etc", {"id": "../../../../etc", "folder": "x"}, {"id": disk, "folder": "../../../etc"}]
    layout.write_text(json.dumps({"disks": escapes, "mounts": [{"target": 3}]}))
    backend.attach_disk(instance, disk, 1, name="ckpt")
    assert json.loads(layout.read_text())["disks"] == [{"id": disk, "folder": "ckpt"}]
    layout.write_text(json.dumps({"disks": escapes, "mounts": [{"target": 3}]}))
    backend.detach_disk(instance, disk)
    assert (Path("/etc").stat().st_uid, Path("/etc").stat().st_mode & 0o777) == (0, 0o755)


@pytest.fixture
def own_account_root(settings):
    """A Slurm root with every owner's jobs running as an account of their own (``gpchub-u<owner>``, in a group of
    its own), created by the console as it creates them on the cluster, and deleted after the test."""
    if os.geteuid() != 0:
        pytest.skip("creating the owners' accounts and handing folders over needs root")
    root = Path(tempfile.mkdtemp(prefix="gpucloud-hub-", dir="/var/tmp"))
    root.chmod(0o755)
    template = {"job_user_template": "gpchub-u{owner}", "job_uid_base": 1_600_200_000}
    settings.SLURM = {**settings.SLURM, "root": str(root)} | template
    yield root
    _delete_accounts([f"gpchub-u{Stub.owner_id}"])
    subprocess.run(["rm", "-rf", "--one-file-system", str(root)], check=True)


def _as_account(*argv):
    return subprocess.run(["runuser", "-u", f"gpchub-u{Stub.owner_id}", "--", *argv], capture_output=True, text=True)


def test_a_hub_item_mounted_has_its_files_for_the_instances_account_alone_and_goes_with_the_unmount(
    own_account_root, settings, tmp_path, monkeypatch
):
    # Given a repository the hub laid out on the console's host (a private one: no other tenant may read it), and a
    # console whose umask keeps what it makes to itself
    settings.LOCAL_HUB_ROOT = tmp_path / "hub"
    laid = settings.LOCAL_HUB_ROOT / "acme" / "private-model"
    (laid / "weights").mkdir(parents=True)
    (laid / "config.json").write_text('{"layers": 2}')
    (laid / "weights" / "part-1.bin").write_bytes(b"\x00" * 1024)
    for laid_out in (laid / "config.json", laid / "weights" / "part-1.bin"):
        laid_out.chmod(0o644)  # as the hub leaves its files
    backend, instance = SlurmBackend(), Stub()

    # When the instance mounts it
    umask = os.umask(0o077)
    try:
        backend.mount(instance, "acme/private-model", "/root/public/acme/private-model")
    finally:
        os.umask(umask)

    # Then its home's link leads to the files, on the zone's shared root, which the instance's account reads and
    # cannot change; the folder of every instance's hub items is not its to list
    link = own_account_root / "instances" / instance.public_id / "root" / "public" / "acme" / "private-model"
    folder = Path(os.readlink(link))
    assert folder == own_account_root / "hub" / instance.public_id / "acme" / "private-model"
    read = _as_account("cat", str(link / "config.json"))
    assert read.stdout == '{"layers": 2}', read.stderr
    assert _as_account("ls", str(link / "weights")).stdout.split() == ["part-1.bin"]
    assert _as_account("sh", "-c", f"echo x > {link}/config.json").returncode != 0
    assert _as_account("rm", "-rf", str(folder)).returncode != 0 and (folder / "config.json").exists()
    assert _as_account("ls", str(own_account_root / "hub")).returncode != 0
    # An account that is not the instance's reads none of it
    other = subprocess.run(
        ["setpriv", "--reuid=4343", "--regid=4343", "--clear-groups", "cat", str(folder / "config.json")],
        capture_output=True,
        text=True,
    )
    assert other.returncode != 0 and "layers" not in other.stdout
    # Nothing was copied where the shared root and the hub's files share a file system
    if (laid / "config.json").stat().st_dev == folder.stat().st_dev:
        assert (folder / "config.json").stat().st_ino == (laid / "config.json").stat().st_ino

    # Mounted again (as each start does), it shows the hub's tree as it is now
    (laid / "weights" / "part-1.bin").unlink()
    backend.mount(instance, "acme/private-model", "/root/public/acme/private-model")
    assert _as_account("ls", str(link / "weights")).stdout.split() == []
    assert _as_account("cat", str(link / "config.json")).stdout == '{"layers": 2}'

    # Unmounted, the link and the instance's copy are gone; released, its folder of hub items too
    backend.unmount(instance, "/root/public/acme/private-model")
    assert not link.is_symlink() and not folder.exists()
    backend.mount(instance, "acme/private-model", "/root/public/acme/private-model")
    monkeypatch.setattr(SlurmBackend, "_current_job", lambda self, instance, config: None)  # its job has ended
    backend.release(instance)
    assert not (own_account_root / "hub" / instance.public_id).exists()


def test_no_hub_item_is_mounted_for_an_account_whose_group_others_share(nobodys_root, settings, tmp_path):
    # nobody's group is nogroup, which other system accounts' files use too
    settings.LOCAL_HUB_ROOT = tmp_path / "hub"
    (settings.LOCAL_HUB_ROOT / "acme" / "model").mkdir(parents=True)
    with pytest.raises(BackendError, match="no group of its own"):
        SlurmBackend().mount(Stub(), "acme/model", "/root/public/acme/model")
    assert not (nobodys_root / "hub" / Stub.public_id).exists()


def test_no_hub_item_is_mounted_in_a_machine_sharing_one_account_with_every_tenant(nobodys_root, settings, tmp_path):
    settings.SLURM = {**settings.SLURM, "job_user_template": ""}
    settings.LOCAL_HUB_ROOT = tmp_path / "hub"
    (settings.LOCAL_HUB_ROOT / "acme" / "model").mkdir(parents=True)
    with pytest.raises(BackendError, match="share one account"):
        SlurmBackend().mount(Stub(), "acme/model", "/root/public/acme/model")
    assert not (nobodys_root / "hub").exists()


def test_a_log_file_the_account_replaced_with_a_link_reads_as_no_logs(nobodys_root):
    backend, instance = SlurmBackend(), Stub()
    instance.backend_job_id = "9"
    folder = backend.log_folder(backend.config(instance))
    folder.mkdir(parents=True)
    (folder / f"{instance.public_id}-9.log").symlink_to("/etc/shadow")
    assert backend.logs(instance) == ""


# On the real cluster -----------------------------------------------------------------------------------------------


def _enter(instance, command):

    argv = get_backend("slurm").enter_argv(instance, command)
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)


SCAN = 'for e in /proc/[0-9]*/environ; do tr "\\0" "\\n" < "$e" 2>/dev/null; done | grep -c -e "$1" -e "$2"'


@pytest.mark.slurm
@pytest.mark.django_db(transaction=True)
def test_each_owners_jobs_run_as_their_own_account_and_no_tenant_reads_anothers_secrets(
    on_slurm, launch, owner, stranger, hf_token
):
    # Given the owner's instance with a secret, and a stranger's instance on the same node
    mine = launch(chip="mlu370-x8", cards=1, image="pytorch-2.2-neuware", secrets=[hf_token])
    theirs = launch(user=stranger, name="theirs", chip="mlu370-x8", cards=1, image="pytorch-2.2-neuware")
    on_slurm.settle(until=lambda: Instance.objects.filter(status=Status.RUNNING).count() == 2, timeout=120)
    mine, theirs = (Instance.objects.with_related().get(pk=i.pk) for i in (mine, theirs))
    lab_token = jupyter_token(mine.public_id)

    # Each runs as its owner's own account
    assert _enter(mine, "id -un").stdout == f"gpctest-u{owner.pk}\n"
    assert _enter(theirs, "id -un").stdout == f"gpctest-u{stranger.pk}\n"
    system = on_slurm.system_disk(mine)
    listing = _enter(mine, f"stat -c '%a %U' {system} {system}/.gpucloud/environment").stdout.split("\n")
    assert listing[:2] == [f"700 gpctest-u{owner.pk}", f"600 gpctest-u{owner.pk}"]

    # The owner's own shell sees the secret and the lab's token in its processes' environments…
    scan = f"sh -c '{SCAN}' scan {VALUE} {lab_token}"
    assert int(_enter(mine, scan).stdout) > 0
    # …the stranger's code finds neither in any process, nor reads the owner's files or logs
    assert int(_enter(theirs, scan).stdout) == 0
    for path in (system, f"{system}/.gpucloud/environment", on_slurm.root / "logs" / f"gpctest-u{owner.pk}"):
        denied = _enter(theirs, f"cat {path}/* {path}")
        assert "Permission denied" in denied.stderr and VALUE not in denied.stdout, path
    assert VALUE not in _enter(theirs, f"grep -rs {VALUE} {on_slurm.root}").stdout


@pytest.mark.skipif(os.geteuid() != 0, reason="hands folders over with chown: needs root")
def test_handing_a_folder_over_never_follows_a_link_out_of_it(tmp_path):

    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "shadow").write_text("root's")
    disk = tmp_path / "disks" / "d1"
    (disk / "sub").mkdir(parents=True)
    (disk / "sub" / "file").write_text("the tenant's")
    (disk / "link-to-file").symlink_to(outside / "shadow")
    (disk / "link-to-folder").symlink_to(outside)
    os.chown(disk, 4242, 4242)  # made under another account before

    _make_private(disk, Account(name="gpctest-u9", uid=4343, gid=4343), like=tmp_path)

    assert (disk.stat().st_uid, disk.stat().st_mode & 0o777) == (4343, 0o700)
    assert (disk / "sub" / "file").stat().st_uid == 4343 and (disk / "link-to-file").lstat().st_uid == 4343
    assert (outside / "shadow").stat().st_uid == 0 and outside.stat().st_uid == 0  # nothing outside given away


IMAGE_SECRET = "hf_S3cr3t-IMAGE_SECRET-7f9c"


class _NoJobs:
    def jobs(self):
        return []

    def submit(self, script, description):  # never reached: the job's description is refused first
        raise AssertionError("submitted")


@pytest.mark.django_db
def test_a_shared_account_machine_from_an_image_never_has_its_secrets_written_where_every_tenant_reads(
    launch, owner, settings, tmp_path, monkeypatch
):
    """As ``test_a_shared_account_job_never_gets_secrets_even_when_the_instance_names_some``, for a machine booted
    from an imported image: its start is refused before its boot folder (the secrets in ``env``, readable by the
    account's group: on a shared account, every tenant's job) is written."""
    secrets.put_secret(owner, "HF_TOKEN", IMAGE_SECRET)
    instance = launch(chip="mlu370-x8", image="pytorch-2.2-neuware", secrets=["HF_TOKEN"])
    store = tmp_path / "store"
    rootfs = store / "sha256-x" / "rootfs"
    rootfs.mkdir(parents=True)
    settings.IMAGE_IMPORT_ROOT = str(store)
    settings.SLURM = {**settings.SLURM, "root": str(tmp_path / "root"), "job_user_template": "", "user": "root"}
    (tmp_path / "root").mkdir()
    image = {"rootfs": str(rootfs), "env": [], "cmd": ["/bin/sh"]}
    monkeypatch.setattr(local_image, "ready_root", lambda slug: image)
    monkeypatch.setattr(SlurmBackend, "client", lambda self, config, **kw: _NoJobs())
    monkeypatch.setattr(slurm_image.local_seccomp, "unavailable", lambda: "")
    monkeypatch.setattr(slurm_image.local_seccomp, "program", lambda: b"")
    monkeypatch.setattr(slurm_image, "host_python", lambda config: "/usr/bin/python3")

    with pytest.raises(BackendError, match="one shared unix account"):
        SlurmBackend().submit(instance)

    env = Path(settings.SLURM["root"]) / "boot" / str(instance.public_id) / "env"
    written = env.read_text() if env.exists() else ""
    assert IMAGE_SECRET not in written, (
        f"the secret was left in {env} (mode {stat.filemode(os.stat(env).st_mode)}, gid {os.stat(env).st_gid})"
    )
