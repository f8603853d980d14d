"""`gpucloud ssh-keys` and `gpucloud ssh` against a real HTTP server (and, for ssh, the real gateway)."""

import json
import subprocess

import pytest

from accounts import services, ssh_keys
from accounts.models import SSHKey
from cli import ssh as ssh_cli
from cli.main import main
from instances.tests.ssh_fixtures import SSH_OPTIONS, make_key

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def cli(live_server, tmp_path, monkeypatch, capsys, owner):
    monkeypatch.setenv("GPUCLOUD_CONFIG", str(tmp_path / "config.json"))
    token = services.create_api_token(owner, name="cli", scope="read_write").plaintext

    def run(*argv):
        code = main(["--url", live_server.url, "--token", token, "--lang", "en", *argv])
        out, err = capsys.readouterr()
        return code, out, err

    return run


def test_keys_are_added_from_a_file_listed_and_removed(cli, owner, tmp_path):
    pair = make_key(tmp_path, "id_ed25519")
    code, out, _ = cli("--json", "ssh-keys", "add", str(pair.public))
    added = json.loads(out)
    assert code == 0 and added["name"] == "id_ed25519@laptop" and added["fingerprint"].startswith("SHA256:")
    code, out, _ = cli("ssh-keys", "list")
    assert code == 0 and "FINGERPRINT" in out and added["fingerprint"] in out
    code, out, _ = cli("ssh-keys", "remove", added["id"])
    assert code == 0 and not SSHKey.objects.filter(user=owner).exists()


def test_adding_a_private_key_file_is_a_clear_error(cli, tmp_path):
    pair = make_key(tmp_path, "id_ed25519")
    code, _, err = cli("ssh-keys", "add", str(pair.private), "--name", "oops")
    assert code == 1 and "400" in err and "This is a PRIVATE key" in err
    code, _, err = cli("ssh-keys", "add", str(tmp_path / "missing.pub"))
    assert code == 1 and "cannot read" in err


def test_another_users_key_cannot_be_removed(cli, stranger, tmp_path):
    key = ssh_keys.add_ssh_key(stranger, public_key=make_key(tmp_path, "theirs").public_text)
    code, _, err = cli("ssh-keys", "remove", str(key.public_id))
    assert code == 1 and "404" in err and SSHKey.objects.filter(pk=key.pk).exists()


def test_ssh_runs_the_system_client_through_the_gateway(
    cli, settings, gateway, running_instance, owner_key, monkeypatch
):
    settings.SSH_GATEWAY_PORT = gateway.port
    settings.SSH_GATEWAY_PUBLIC_HOST = "127.0.0.1"
    ran = []

    def execv(program, argv):
        ran.append(argv)
        # What the exec would run, with the test's client options: the gateway answers it.
        command = [argv[0], *SSH_OPTIONS, *argv[1:]]
        ran.append(subprocess.run(command, capture_output=True, timeout=30, check=False))

    monkeypatch.setattr(ssh_cli.os, "execv", execv)
    cli("ssh", "-i", str(owner_key.private), str(running_instance.public_id), "echo", "$((6*7))")
    user = f"{running_instance.public_id}@127.0.0.1"
    assert ran[0] == ["ssh", "-p", str(gateway.port), "-i", str(owner_key.private), user, "echo", "$((6*7))"]
    assert ran[1].returncode == 0 and ran[1].stdout == b"42\n"


def test_ssh_to_an_instance_that_cannot_be_entered_says_why(cli, launch, monkeypatch):
    instance = launch(name="sim")
    monkeypatch.setattr(ssh_cli.os, "execv", lambda *args: pytest.fail("ssh must not run"))
    code, _, err = cli("ssh", str(instance.public_id))
    assert code == 1 and "409" in err and "not running" in err
    code, _, err = cli("ssh", "00000000-0000-4000-8000-000000000000")
    assert code == 1 and "404" in err
