"""The SSH gateway with the real OpenSSH client: commands, exit status, a pty, scp both ways, and every login
that must be refused. The instance is entered through ``host_shell`` (see ``ssh_fixtures``: /bin/sh on this host
in a temporary home), everything else is real."""

import fcntl
import os
import pty
import select
import signal
import struct
import subprocess
import termios
import time
import uuid
from pathlib import Path

import pytest

from accounts import ssh_keys
from accounts.models import SSHKey
from instances import lifecycle, ssh_gateway
from instances.backends import BackendError
from instances.backends.simulated import SimulatedBackend
from instances.models import Instance
from instances.tests.fixtures import settle
from instances.tests.ssh_fixtures import SSH_OPTIONS, make_key, scp, ssh
from teams import services as teams
from teams.models import Membership
from teams.roles import Role
from tests.fixtures.factories import UserFactory

# The gateway's thread reads the database through its own connection: it must see committed rows.
pytestmark = pytest.mark.django_db(transaction=True)


def test_a_command_runs_in_the_instance_and_prints_its_output(gateway, running_instance, owner_key):
    result = ssh(gateway.port, owner_key, running_instance.public_id, "echo $((6*7))")
    assert result.returncode == 0, result.stderr
    assert result.stdout == b"42\n"


def test_the_exit_status_and_stderr_come_back(gateway, running_instance, owner_key):
    result = ssh(gateway.port, owner_key, running_instance.public_id, "echo oops >&2; exit 3")
    assert result.returncode == 3
    assert result.stderr == b"oops\n" and result.stdout == b""


def test_the_command_runs_in_the_home_folder_and_reads_stdin(gateway, running_instance, owner_key, host_shell):
    result = ssh(gateway.port, owner_key, running_instance.public_id, "pwd; wc -c", input=b"x" * 100_000)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [str(host_shell).encode(), b"100000"]


def test_the_user_name_may_leave_out_the_dashes(gateway, running_instance, owner_key):
    result = ssh(gateway.port, owner_key, running_instance.public_id.hex, "echo ok")
    assert result.returncode == 0 and result.stdout == b"ok\n"


def test_a_login_records_when_the_key_was_last_used(gateway, running_instance, owner_key, owner):
    assert SSHKey.objects.get(user=owner).last_used_at is None
    assert ssh(gateway.port, owner_key, running_instance.public_id, "true").returncode == 0
    assert SSHKey.objects.get(user=owner).last_used_at is not None


def test_a_pty_session_has_a_terminal_of_the_clients_type(gateway, running_instance, owner_key):
    command = "tty; echo term=$TERM"
    term = ["-o", "SetEnv=TERM=vt220"]
    result = ssh(gateway.port, owner_key, running_instance.public_id, "-tt", command, options=term)
    output = result.stdout.decode().replace("\r", "")
    assert result.returncode == 0, output
    assert "/dev/pts/" in output and "term=vt220" in output


def test_a_pty_session_delivers_all_output_of_a_program_that_exits_at_once(gateway, running_instance, owner_key):
    # The terminal is hung up when its session ends: what the program wrote last must have reached the client.
    result = ssh(gateway.port, owner_key, running_instance.public_id, "-tt", "seq 50000; exit 7")
    lines = result.stdout.decode().split()
    assert result.returncode == 7
    assert len(lines) == 50000 and lines[-1] == "50000"


def test_an_interactive_login_shell_runs_what_is_typed(gateway, running_instance, owner_key):
    typed = b"echo $((6*7))\nexit 5\n"
    result = ssh(gateway.port, owner_key, running_instance.public_id, "-tt", input=typed)
    assert result.returncode == 5
    assert b"42" in result.stdout


def test_the_terminal_follows_the_clients_window_size(gateway, running_instance, owner_key):
    # given ssh on a terminal of 24 rows × 80 columns
    master, terminal = pty.openpty()
    _window(master, 24, 80)
    user = f"{running_instance.public_id}@127.0.0.1"
    argv = ["ssh", "-p", str(gateway.port), "-i", str(owner_key.private), *SSH_OPTIONS, "-tt", user]
    command = "stty size; read line; stty size"
    client = subprocess.Popen([*argv, command], stdin=terminal, stdout=terminal, stderr=terminal)
    os.close(terminal)
    try:
        assert "24 80" in _read_until(master, "24 80")
        # when the window grows and the client is told so
        _window(master, 40, 100)
        client.send_signal(signal.SIGWINCH)
        time.sleep(0.3)  # the window-change request reaches the gateway before the line
        os.write(master, b"go\n")
        # then the program in the instance sees the new size
        assert "40 100" in _read_until(master, "40 100")
        assert client.wait(timeout=10) == 0
    finally:
        client.kill()
        os.close(master)


def test_a_break_from_the_client_leaves_the_session_working(gateway, running_instance, owner_key):
    # given an interactive session on a terminal, where OpenSSH's escape "~B" sends a break request
    master, terminal = pty.openpty()
    user = f"{running_instance.public_id}@127.0.0.1"
    argv = ["ssh", "-p", str(gateway.port), "-i", str(owner_key.private), *SSH_OPTIONS, "-tt", user]
    command = "echo ready; read line; echo got-$line"
    client = subprocess.Popen([*argv, command], stdin=terminal, stdout=terminal, stderr=terminal)
    os.close(terminal)
    try:
        assert "ready" in _read_until(master, "ready")
        os.write(master, b"~B")
        time.sleep(0.3)  # the break reaches the gateway before the line
        os.write(master, b"go\n")
        # then what is typed after it still reaches the program
        assert "got-go" in _read_until(master, "got-go")
        assert client.wait(timeout=10) == 0
    finally:
        client.kill()
        os.close(master)


def _window(fd: int, rows: int, columns: int) -> None:
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))


def _read_until(fd: int, text: str, timeout: float = 10) -> str:
    seen, deadline = "", time.monotonic() + timeout
    while text not in seen and time.monotonic() < deadline:
        if select.select([fd], [], [], 0.1)[0]:
            try:
                seen += os.read(fd, 4096).decode(errors="replace")
            except OSError:
                break
    return seen


def test_scp_copies_a_file_in_and_out(gateway, running_instance, owner_key, host_shell, sftp_server, tmp_path):
    local = tmp_path / "weights.bin"
    local.write_bytes(bytes(range(256)) * 4000)
    target = f"{running_instance.public_id}@127.0.0.1:"
    (host_shell / "model").mkdir()
    for protocol in ([], ["-O"]):  # SFTP (the client's default) and the classic scp protocol
        result = scp(gateway.port, owner_key, str(local), target + "model/", *protocol)
        assert result.returncode == 0, result.stderr
        assert (host_shell / "model" / "weights.bin").read_bytes() == local.read_bytes()
        back = tmp_path / f"back{len(protocol)}.bin"
        result = scp(gateway.port, owner_key, target + "model/weights.bin", str(back), *protocol)
        assert result.returncode == 0, result.stderr
        assert back.read_bytes() == local.read_bytes()
        (host_shell / "model" / "weights.bin").unlink()


def test_another_users_key_is_refused(gateway, running_instance, owner_key, stranger_key):
    result = ssh(gateway.port, stranger_key, running_instance.public_id, "echo in")
    assert result.returncode == 255 and b"Permission denied (publickey)" in result.stderr
    assert result.stdout == b""


def test_a_key_on_no_account_is_refused(gateway, running_instance, owner_key, tmp_path):
    unknown = make_key(tmp_path / "keys", "unknown")
    result = ssh(gateway.port, unknown, running_instance.public_id, "echo in")
    assert result.returncode == 255 and b"Permission denied" in result.stderr


def test_a_connection_may_offer_only_so_many_keys(gateway, running_instance, owner_key, tmp_path):
    others = [make_key(tmp_path / "keys", f"other{n}") for n in range(ssh_gateway.MAX_KEYS_PER_CONNECTION)]
    identities = [arg for pair in [*others, owner_key] for arg in ("-i", str(pair.private))]
    result = ssh(gateway.port, others[0], running_instance.public_id, "true", options=identities)
    assert result.returncode == 255 and b"Permission denied" in result.stderr
    identities = [arg for pair in [owner_key, *others] for arg in ("-i", str(pair.private))]
    assert ssh(gateway.port, others[0], running_instance.public_id, "true", options=identities).returncode == 0


@pytest.mark.parametrize("user", [str(uuid.uuid4()), "root", "ubuntu", "12345"])
def test_an_unknown_instance_or_wrong_user_name_is_refused(gateway, running_instance, owner_key, user):
    result = ssh(gateway.port, owner_key, user, "echo in")
    assert result.returncode == 255 and b"Permission denied" in result.stderr


def test_a_stopped_instance_is_refused(gateway, running_instance, owner_key):
    lifecycle.stop(Instance.objects.with_related().get(pk=running_instance.pk))
    settle()
    assert Instance.objects.get(pk=running_instance.pk).status == "stopped"
    result = ssh(gateway.port, owner_key, running_instance.public_id, "echo in")
    assert result.returncode == 255 and b"Permission denied" in result.stderr


def test_passwords_and_keyboard_interactive_are_not_offered(gateway, running_instance, owner_key):
    options = ["-o", "PreferredAuthentications=password,keyboard-interactive", "-o", "NumberOfPasswordPrompts=0"]
    result = ssh(gateway.port, owner_key, running_instance.public_id, "true", options=options)
    assert result.returncode == 255 and b"Permission denied (publickey)" in result.stderr


def test_port_and_agent_forwarding_are_refused(gateway, running_instance, owner_key):
    options = ["-o", "ExitOnForwardFailure=yes", "-L", "0:127.0.0.1:22"]
    assert ssh(gateway.port, owner_key, running_instance.public_id, "true", options=options).returncode == 255
    result = ssh(gateway.port, owner_key, running_instance.public_id, "-W", "127.0.0.1:22")
    assert result.returncode == 255
    result = ssh(gateway.port, owner_key, running_instance.public_id, "-A", "echo ${SSH_AUTH_SOCK:-none}")
    assert result.stdout == b"none\n"


def test_a_backend_that_cannot_enter_says_why(gateway, running_instance, owner_key, monkeypatch):
    def refuse(self, instance, command):
        raise BackendError("the machine is rebooting")

    monkeypatch.setattr(SimulatedBackend, "enter_argv", refuse)
    result = ssh(gateway.port, owner_key, running_instance.public_id, "echo in")
    assert result.returncode == 1 and result.stderr == b"the machine is rebooting\n"


def test_an_endpoint_cannot_be_entered(gateway, running_instance, owner_key):
    Instance.objects.filter(pk=running_instance.pk).update(kind=Instance.Kind.ENDPOINT)
    result = ssh(gateway.port, owner_key, running_instance.public_id, "echo in")
    assert result.returncode == 255 and b"Permission denied" in result.stderr


@pytest.mark.parametrize("terminal", [[], ["-tt"]], ids=["pipes", "pty"])
def test_a_client_that_goes_away_leaves_nothing_running(gateway, running_instance, owner_key, host_shell, terminal):
    user = f"{running_instance.public_id}@127.0.0.1"
    argv = ["ssh", "-p", str(gateway.port), "-i", str(owner_key.private), *SSH_OPTIONS, *terminal, user]
    client = subprocess.Popen([*argv, "echo $$ > pid; exec sleep 300"], stdin=subprocess.DEVNULL)
    pid_file = host_shell / "pid"
    _wait_for(lambda: pid_file.exists() and pid_file.read_text().strip(), "the program to start")
    program = int(pid_file.read_text())
    client.kill()
    client.wait()
    _wait_for(lambda: not _alive(program), "the program to be hung up")


def _wait_for(condition, what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def _alive(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except (FileNotFoundError, ProcessLookupError):  # gone, or going while its status is read
        return False
    return "State:\tZ" not in status  # a zombie has ended; its parent has not collected it yet


def test_a_teams_instance_lets_in_the_keys_of_members_who_may_operate_it_and_no_one_else(
    gateway, launch, host_shell, owner, owner_key, tmp_path
):

    team = teams.create_team(owner, name="Vision", slug="vision")
    instance = launch(user=team.account, name="team-box")
    settle()
    assert Instance.objects.get(pk=instance.pk).status == "running"
    keys = {}
    for role in (Role.DEVELOPER, Role.READ_ONLY, Role.BILLING):
        person = UserFactory(email=f"{role}@example.com")
        Membership.objects.create(team=team, user=person, role=role)
        keys[role] = make_key(tmp_path / "keys", role)
        ssh_keys.add_ssh_key(person, public_key=keys[role].public_text)

    # The owner and a developer may operate the team's machine: their own keys open it.
    for key in (owner_key, keys[Role.DEVELOPER]):
        result = ssh(gateway.port, key, instance.public_id, "echo in")
        assert result.returncode == 0 and result.stdout == b"in\n", result.stderr
    # Roles that may only see it (or pay for it) are refused like a stranger.
    for role in (Role.READ_ONLY, Role.BILLING):
        result = ssh(gateway.port, keys[role], instance.public_id, "echo in")
        assert result.returncode == 255 and b"Permission denied (publickey)" in result.stderr
    # A member who leaves is out at the next login.
    Membership.objects.filter(team=team, role=Role.DEVELOPER).delete()
    result = ssh(gateway.port, keys[Role.DEVELOPER], instance.public_id, "echo in")
    assert result.returncode == 255 and b"Permission denied" in result.stderr
