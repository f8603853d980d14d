"""`gpucloud teams …` against a real HTTP server: create, invite, accept from the e-mailed link, show, leave."""

import re

import pytest

from console import services as console_services
from console.cli.main import main
from tests.fixtures.factories import UserFactory

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def cli(live_server, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("GPUCLOUD_CONFIG", str(tmp_path / "config.json"))

    def run(user, *argv):
        token = console_services.create_api_token(user, name="cli", scope="read_write").plaintext
        code = main(["--url", live_server.url, "--token", token, "--lang", "en", *argv])
        out, err = capsys.readouterr()
        return code, out, err

    return run


def test_a_team_from_the_command_line(cli, owner, mailoutbox):
    assert cli(owner, "teams", "create", "nlp-lab", "NLP 实验室")[0] == 0
    code, out, _ = cli(owner, "teams", "invite", "nlp-lab", "student@example.com", "--role", "read_only")
    assert code == 0 and "Invited student@example.com as read_only" in out
    link = re.search(r"https?://\S+/teams/invitations/\S+/", mailoutbox[0].body).group(0)

    student = UserFactory(email="student@example.com")
    code, out, _ = cli(student, "teams", "accept", link)
    assert code == 0 and "You joined NLP 实验室 (nlp-lab) as read_only" in out
    code, out, _ = cli(student, "teams", "ls")
    assert code == 0 and "nlp-lab" in out and "read_only" in out
    code, out, _ = cli(owner, "teams", "show", "nlp-lab")
    assert "student@example.com" in out and "owner@example.com" in out

    code, _, err = cli(student, "teams", "invite", "nlp-lab", "x@example.com")
    assert code != 0 and "does not allow" in err  # a read-only member cannot invite
    assert cli(student, "teams", "leave", "nlp-lab")[0] == 0
    code, _, err = cli(student, "teams", "show", "nlp-lab")
    assert code != 0 and "No such team" in err
