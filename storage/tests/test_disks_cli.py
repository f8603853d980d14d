"""`gpucloud disks …` and `gpucloud instances mount|unmount` against a real HTTP server."""

import pytest

from accounts import services as console_services
from cli.main import main
from instances.tests.fixtures import settle
from marketplace.hub import services as hub_services
from storage.models import CloudDisk, HubMount

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("owner_has_topped_up")]


@pytest.fixture
def cli(live_server, owner, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("GPUCLOUD_CONFIG", str(tmp_path / "config.json"))
    token = console_services.create_api_token(owner, name="cli", scope="read_write").plaintext

    def run(*argv):
        code = main(["--url", live_server.url, "--token", token, "--lang", "en", *argv])
        out, err = capsys.readouterr()
        return code, out, err

    return run


def test_disks_from_the_command_line(cli, launch, eager_tasks):
    instance = launch(zone="cn-east-xc")
    settle()
    assert cli("disks", "create", "ckpt", "--size", "100", "--zone", "cn-east-xc")[0] == 0
    code, out, _err = cli("disks", "ls")
    assert code == 0 and "ckpt" in out and "available" in out
    assert cli("disks", "attach", "ckpt", str(instance.public_id))[0] == 0
    assert CloudDisk.objects.get().instance_id == instance.pk
    code, _out, err = cli("disks", "grow", "ckpt", "--size", "10")
    assert code == 1 and "grow" in err
    assert cli("disks", "grow", "ckpt", "--size", "200")[0] == 0
    code, _out, err = cli("disks", "rm", "ckpt")
    assert code == 1 and "409" in err
    assert cli("disks", "detach", "ckpt")[0] == 0
    assert cli("disks", "rm", "ckpt")[0] == 0
    assert CloudDisk.objects.get().status == "deleted"


def test_mount_and_unmount_from_the_command_line(cli, launch, eager_tasks):
    hub_services.save_item(repo="THUDM/chatglm3-6b")
    instance = launch(zone="cn-east-xc")
    settle()
    code, out, _err = cli("instances", "mount", str(instance.public_id), "THUDM/chatglm3-6b")
    assert code == 0 and "/root/public/THUDM/chatglm3-6b" in out
    code, out, _err = cli("instances", "mounts", str(instance.public_id))
    assert "/root/shared" in out and "THUDM/chatglm3-6b" in out
    assert cli("instances", "unmount", str(instance.public_id), "THUDM/chatglm3-6b")[0] == 0
    assert not HubMount.objects.exists()
