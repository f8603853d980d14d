"""An open SSH session ends within seconds of the access that opened it: a member removed from the team or demoted
to a role that may not operate its machines, a deleted key, a suspended account, a stopped instance. The gateway,
the keys, the database and the OpenSSH client are real; the instance is entered through ``host_shell`` (/bin/sh on
this host in a temporary home, see ``ssh_fixtures``), where the session's program keeps writing a file as a user's
job writes to the team's storage."""

import subprocess
import time
from pathlib import Path

import pytest

from accounts import ssh_keys
from accounts.models import SSHKey
from instances import lifecycle
from instances.models import Instance
from instances.tests.fixtures import settle
from instances.tests.ssh_fixtures import SSH_OPTIONS, make_key
from teams import services as teams
from teams.models import Membership
from teams.roles import Role
from tests.fixtures.factories import UserFactory

# The gateway's thread reads the database through its own connection: it must see committed rows.
pytestmark = pytest.mark.django_db(transaction=True)

ENDS_WITHIN = 10  # seconds, from the change to the client's exit and the program's end
# The session's program, in a folder of its own: its pid, then a line a fifth of a second into a file, until it is
# hung up.
WRITER = "mkdir -p {name} && cd {name} && echo $$ > pid && while :; do date >> written; sleep 0.2; done"


@pytest.fixture(autouse=True)
def recheck(settings):
    settings.ACCESS_RECHECK_SECONDS = 1


@pytest.fixture
def team(owner):
    return teams.create_team(owner, name="Vision", slug="vision")


@pytest.fixture
def team_instance(launch, host_shell, team):
    instance = launch(user=team.account, name="team-box")
    settle()
    assert Instance.objects.get(pk=instance.pk).status == "running"
    return instance


@pytest.fixture
def developer(team, tmp_path):
    """A developer of the team (who may operate its machines) and their key pair."""
    person = UserFactory(email="dev@example.com")
    Membership.objects.create(team=team, user=person, role=Role.DEVELOPER)
    pair = make_key(tmp_path / "keys", "dev")
    ssh_keys.add_ssh_key(person, public_key=pair.public_text)
    return person, pair


class Session:
    """An ssh client running WRITER in the instance, with or without a terminal."""

    def __init__(self, port: int, key, instance: Instance, home: Path, *, terminal: bool = False, name="job"):
        user = f"{instance.public_id}@127.0.0.1"
        argv = ["ssh", "-p", str(port), "-i", str(key.private), *SSH_OPTIONS, *(["-tt"] if terminal else []), user]
        self.folder = home / name
        command = WRITER.format(name=name)
        self.client = subprocess.Popen(
            [*argv, command], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        _wait_for(lambda: (self.folder / "written").exists(), "the session to start")
        self.program = int((self.folder / "pid").read_text())

    def ends_soon(self) -> tuple[float, bytes]:
        """Seconds until the client exits and the program is gone, and what the client printed on stderr."""
        began = time.monotonic()
        try:
            _stdout, stderr = self.client.communicate(timeout=ENDS_WITHIN)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the session was still open {ENDS_WITHIN} s later")
        _wait_for(lambda: not _alive(self.program), "the program to be hung up", timeout=ENDS_WITHIN)
        took = time.monotonic() - began
        written = self.written()
        time.sleep(0.6)
        assert self.written() == written, "the program still writes"
        return took, stderr

    def written(self) -> str:
        return (self.folder / "written").read_text()

    def close(self) -> None:
        self.client.kill()
        self.client.wait()


@pytest.fixture
def sessions():
    opened = []
    yield lambda *args, **kwargs: opened.append(Session(*args, **kwargs)) or opened[-1]
    for session in opened:
        session.close()


def _assert_ended(session: Session) -> None:
    took, stderr = session.ends_soon()
    assert took < ENDS_WITHIN
    assert session.client.returncode == 255
    assert b"Your access to this instance has ended" in stderr


@pytest.mark.parametrize("terminal", [False, True], ids=["pipes", "pty"])
def test_a_member_removed_from_the_team_is_hung_up(
    gateway, team, team_instance, developer, owner, host_shell, sessions, terminal
):
    person, key = developer
    session = sessions(gateway.port, key, team_instance, host_shell, terminal=terminal)

    teams.remove_member(teams.membership(owner, team.slug), person.public_id)

    _assert_ended(session)


def test_a_member_whose_role_no_longer_operates_is_hung_up(
    gateway, team, team_instance, developer, owner, host_shell, sessions
):
    person, key = developer
    session = sessions(gateway.port, key, team_instance, host_shell)

    teams.change_role(teams.membership(owner, team.slug), person.public_id, Role.READ_ONLY)

    _assert_ended(session)


def test_a_deleted_key_is_hung_up_and_the_owners_other_key_goes_on(
    gateway, running_instance, owner, owner_key, host_shell, sessions, tmp_path
):
    other = make_key(tmp_path / "keys", "other")
    other_row = ssh_keys.add_ssh_key(owner, public_key=other.public_text)
    session = sessions(gateway.port, owner_key, running_instance, host_shell, name="first")
    kept = sessions(gateway.port, other, running_instance, host_shell, name="second")

    deleted = SSHKey.objects.filter(user=owner).exclude(pk=other_row.pk).get()
    ssh_keys.remove_ssh_key(owner, deleted.public_id)

    _assert_ended(session)
    before = kept.written()
    time.sleep(1.5)
    assert kept.client.poll() is None and kept.written() != before  # the other key's session still works


def test_a_suspended_account_is_hung_up(gateway, running_instance, owner, owner_key, host_shell, sessions):
    session = sessions(gateway.port, owner_key, running_instance, host_shell)

    owner.is_active = False
    owner.save(update_fields=["is_active"])

    _assert_ended(session)


def test_a_stopped_instance_is_hung_up(gateway, running_instance, owner_key, host_shell, sessions):
    session = sessions(gateway.port, owner_key, running_instance, host_shell)

    lifecycle.stop(Instance.objects.with_related().get(pk=running_instance.pk))
    settle()
    assert Instance.objects.get(pk=running_instance.pk).status == "stopped"

    _assert_ended(session)


def _wait_for(condition, what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def _alive(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return "State:\tZ" not in status
