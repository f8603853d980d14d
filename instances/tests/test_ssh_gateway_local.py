"""The SSH gateway into real machines of the local backend (bubblewrap sandboxes): the system OpenSSH client, the
gateway, and the backend's own way in (nsenter) and home folder — no fake."""

import subprocess
import time

import pytest
from django.conf import settings

from accounts import ssh_keys
from instances import lifecycle
from instances.choices import Status
from instances.models import Instance
from instances.tests.ssh_fixtures import SSH_OPTIONS, make_key, scp, ssh
from teams import services as teams
from teams.models import Membership
from teams.roles import Role
from tests.fixtures.factories import UserFactory

pytestmark = [pytest.mark.sandbox, pytest.mark.django_db(transaction=True)]


def fresh(instance):
    return Instance.objects.with_related().get(pk=instance.pk)


@pytest.fixture
def machine(on_local, launch):
    instance = launch(chip="ascend-910b", cards=1)
    on_local.settle(until=lambda: fresh(instance).status == Status.RUNNING, message="the machine to run")
    return fresh(instance)


def test_commands_run_inside_the_machine_with_their_status(gateway, machine, owner_key):
    result = ssh(gateway.port, owner_key, machine.public_id, "echo $((6*7)); cd && pwd; exit 3")
    assert result.returncode == 3, result.stderr
    assert result.stdout.split() == [b"42", b"/root"]


def test_a_pty_session_inside_the_machine(gateway, machine, owner_key):
    # A terminal inside, with a name in the machine's own /dev/pts (the gateway's pty is not in it)
    command = "[ -t 0 ] && [ -t 1 ] && echo on-a-terminal; tty; exit 4"
    result = ssh(gateway.port, owner_key, machine.public_id, "-tt", command)
    output = result.stdout.decode().replace("\r", "")
    assert result.returncode == 4, output
    assert "on-a-terminal\n/dev/pts/" in output and "not a tty" not in output


def test_scp_copies_into_the_home_and_back_owned_by_the_machines_user(
    gateway, machine, owner_key, on_local, sftp_server, tmp_path
):
    local_file = tmp_path / "data.bin"
    local_file.write_bytes(b"x" * 100_000)
    target = f"{machine.public_id}@127.0.0.1:"
    assert scp(gateway.port, owner_key, str(local_file), target).returncode == 0
    home = on_local.home(machine)
    assert (home / "data.bin").read_bytes() == local_file.read_bytes()
    assert (home / "data.bin").stat().st_uid == home.stat().st_uid
    seen = ssh(gateway.port, owner_key, machine.public_id, "wc -c < /root/data.bin; echo hi > /root/made.txt")
    assert seen.stdout.split() == [b"100000"]
    back = tmp_path / "made.txt"
    assert scp(gateway.port, owner_key, target + "made.txt", str(back)).returncode == 0
    assert back.read_text() == "hi\n"


def test_a_stopped_machine_is_refused(gateway, machine, owner_key, on_local):
    lifecycle.stop(fresh(machine))
    on_local.settle(until=lambda: fresh(machine).status == Status.STOPPED, message="the machine to stop")
    result = ssh(gateway.port, owner_key, machine.public_id, "true")
    assert result.returncode == 255 and b"Permission denied" in result.stderr


def test_an_interactive_login_shell_inside_the_machine(gateway, machine, owner_key):
    result = ssh(gateway.port, owner_key, machine.public_id, "-tt", input=b"echo $((6*7))\nexit 5\n")
    assert result.returncode == 5 and b"42" in result.stdout


def test_sftp_runs_inside_the_machine_and_reads_nothing_the_machine_cannot(
    gateway, machine, owner_key, sftp_server, tmp_path
):

    console_file = settings.BASE_DIR / "config" / "settings.py"
    made = ssh(gateway.port, owner_key, machine.public_id, f"ln -s / /root/escape && ln -s {console_file} /root/s")
    assert made.returncode == 0, made.stderr
    target = f"{machine.public_id}@127.0.0.1:"
    # The console's files do not exist inside, through a symlink or not; the host's secrets stay unreadable.
    for path in ("s", f"escape{console_file}", str(console_file), "/etc/shadow", "escape/etc/shadow"):
        got = tmp_path / "got"
        assert scp(gateway.port, owner_key, target + path, str(got)).returncode != 0 and not got.exists(), path
    # What the machine can read, SFTP can: its own hostname file, through the symlink too.
    got = tmp_path / "hostname"
    assert scp(gateway.port, owner_key, target + "escape/proc/sys/kernel/hostname", str(got)).returncode == 0
    assert got.read_text().startswith("gpu-")


def test_a_member_removed_from_the_team_is_hung_up_inside_the_machine(gateway, on_local, launch, owner, tmp_path):

    # given a developer of a team with an SSH session open in the team's machine, writing a file there
    team = teams.create_team(owner, name="Vision", slug="vision")
    instance = launch(user=team.account, chip="ascend-910b", cards=1)
    on_local.settle(until=lambda: fresh(instance).status == Status.RUNNING, message="the machine to run")
    developer = UserFactory(email="dev@example.com")
    Membership.objects.create(team=team, user=developer, role=Role.DEVELOPER)
    key = make_key(tmp_path / "keys", "dev")
    ssh_keys.add_ssh_key(developer, public_key=key.public_text)
    writer = "while :; do date >> /root/written; sleep 0.2; done"
    argv = ["ssh", "-p", str(gateway.port), "-i", str(key.private), *SSH_OPTIONS, f"{instance.public_id}@127.0.0.1"]
    client = subprocess.Popen([*argv, writer], stdin=subprocess.PIPE, stderr=subprocess.PIPE)
    written = on_local.home(fresh(instance)) / "written"
    try:
        deadline = time.monotonic() + 30
        while not written.exists():
            assert time.monotonic() < deadline, "the session did not start"
            time.sleep(0.1)

        # when the team's owner removes them
        teams.remove_member(teams.membership(owner, team.slug), developer.public_id)
        began = time.monotonic()

        # then their session ends within seconds, and what it ran in the machine with it
        _stdout, stderr = client.communicate(timeout=10)
        assert time.monotonic() - began < 10
        assert b"Your access to this instance has ended" in stderr
        time.sleep(1)
        size = written.stat().st_size
        time.sleep(1)
        assert written.stat().st_size == size, "the program inside still writes"
    finally:
        client.kill()
        client.wait()
