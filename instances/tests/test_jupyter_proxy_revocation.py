"""What stays open through a lab — a kernel's or terminal's websocket, an exposed port's event stream — closes within
seconds of the access that opened it: a member removed from the team, signing out of the console, a suspended
account, a stopped instance. The console runs under uvicorn (``console_server``) and the lab is a fake Jupyter on a
Unix socket (``fake_jupyter``); the look-up a lab keeps for its pages (``LAB_AUTH_CACHE_SECONDS``) is left at its
default, as in production."""

import shutil
import tempfile
import time
from importlib import import_module
from pathlib import Path

import httpx
import pytest
from django.conf import settings
from django.contrib.sessions.models import Session
from websockets.exceptions import ConnectionClosed

from instances import lifecycle
from instances.backends import JupyterServer, get_backend
from instances.models import Instance
from instances.tests.fixtures import settle
from teams import services as teams
from teams.models import Membership
from teams.roles import Role
from tests.asgi_server import ServerThread, lab_browser, open_websocket
from tests.fixtures.factories import UserFactory

from .fake_jupyter import FakeJupyter

RECHECK = 1  # ACCESS_RECHECK_SECONDS in these tests
# From the change to the close: the re-check's period, and time for its look-up on a busy machine. (A lab's kept
# look-up alone would take LAB_AUTH_CACHE_SECONDS, 5 by default, and more.)
CLOSES_WITHIN = 4


@pytest.fixture(autouse=True)
def recheck(settings):
    settings.ACCESS_RECHECK_SECONDS = RECHECK


@pytest.fixture
def team(owner):
    return teams.create_team(owner, name="Vision", slug="vision")


@pytest.fixture
def developer(team):
    person = UserFactory(email="dev@example.com")
    Membership.objects.create(team=team, user=person, role=Role.DEVELOPER)
    return person


@pytest.fixture
def instance(launch, team):
    instance = launch(user=team.account, name="team-lab")
    settle()
    assert Instance.objects.get(pk=instance.pk).status == "running"
    return instance


@pytest.fixture
def jupyter(instance, monkeypatch):
    """A fake Jupyter on a Unix socket for the team's instance, and its backend saying it answers there."""
    folder = Path(tempfile.mkdtemp(prefix="jl-", dir="/tmp"))  # a short path: Unix socket paths stop at 107 bytes
    fake = FakeJupyter(f"/instances/{instance.public_id}/lab/")
    fake.socket = str(folder / "jupyter.sock")
    server = JupyterServer(token=fake.token, base_path=fake.base_path, socket=fake.socket)
    monkeypatch.setattr(get_backend(instance.backend_name), "jupyter", lambda inst: server)
    with ServerThread(fake, uds=fake.socket):
        yield fake
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def lab(console_server, jupyter, developer, instance):
    """The developer's browser on the team instance's lab, holding the lab's cookie."""
    client = lab_browser(console_server, developer, instance.public_id)
    yield client
    client.close()


@pytest.fixture
def terminal(console_server, lab, jupyter):
    """A terminal's websocket open in the developer's lab, echoing."""
    with open_websocket(console_server, f"{jupyter.base_path}terminals/websocket/1", lab=lab) as ws:
        ws.send("ls")
        assert ws.recv(timeout=10) == "ls"
        yield ws


def _closes_soon(ws) -> None:
    began = time.monotonic()
    with pytest.raises(ConnectionClosed) as closed:
        while True:  # whatever the machine still echoes, until the close
            ws.recv(timeout=CLOSES_WITHIN + 6)
    took = time.monotonic() - began
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1008  # policy: access ended
    assert took < CLOSES_WITHIN, f"closed after {took:.1f} s"


def test_a_member_removed_from_the_team_loses_the_open_terminal(terminal, team, owner, developer):
    teams.remove_member(teams.membership(owner, team.slug), developer.public_id)
    _closes_soon(terminal)


def test_a_member_whose_role_no_longer_operates_loses_the_open_terminal(terminal, team, owner, developer):
    teams.change_role(teams.membership(owner, team.slug), developer.public_id, Role.READ_ONLY)
    _closes_soon(terminal)


def test_signing_out_of_the_console_closes_the_open_terminal(terminal, lab):
    lab.console.cookies.clear()
    for key in Session.objects.values_list("session_key", flat=True):
        # What signing out does to the console session (the engine's flush: the database row and any cached copy)
        import_module(settings.SESSION_ENGINE).SessionStore(session_key=key).delete()
    _closes_soon(terminal)


def test_a_suspended_account_loses_the_open_terminal(terminal, developer):
    developer.is_active = False
    developer.save(update_fields=["is_active"])
    _closes_soon(terminal)


def test_a_stopped_instance_closes_the_open_terminal(terminal, instance):
    # The fake Jupyter answers on, as a machine's may for a moment (or an agent's address on another node).
    lifecycle.stop(Instance.objects.with_related().get(pk=instance.pk))
    settle()
    assert Instance.objects.get(pk=instance.pk).status == "stopped"
    _closes_soon(terminal)


def test_an_exposed_ports_event_stream_is_cut_off_for_a_removed_member(lab, jupyter, team, owner, developer):
    with lab.stream("GET", f"{jupyter.base_path}events") as response:
        assert response.status_code == 200
        lines = response.iter_lines()
        assert next(lines) == "event 0"
        teams.remove_member(teams.membership(owner, team.slug), developer.public_id)
        began = time.monotonic()
        with pytest.raises(httpx.RemoteProtocolError):  # cut off, not ended as if complete
            for _line in lines:
                assert time.monotonic() - began < CLOSES_WITHIN, "the stream still runs"
    assert time.monotonic() - began < CLOSES_WITHIN
