"""`gpucloud teams …` against a real HTTP server: create, invite, accept from the e-mailed link, show, leave."""

import re
from decimal import Decimal

import pytest

from accounts import services as console_services
from cli.main import main
from instances.models import Instance
from teams import services as teams
from teams.models import Membership
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


def test_a_teams_token_and_budgets_from_the_command_line(live_server, tmp_path, monkeypatch, capsys, owner, catalog):

    monkeypatch.setenv("GPUCLOUD_CONFIG", str(tmp_path / "config.json"))
    team = teams.create_team(owner, name="视觉实验室", slug="vision-lab")
    developer = UserFactory(email="dev@example.com")
    Membership.objects.create(team=team, user=developer, role="developer")

    def run(*argv):
        code = main(["--url", live_server.url, "--lang", "en", *argv])
        out, err = capsys.readouterr()
        return code, out, err

    personal = console_services.create_api_token(owner, name="cli", scope="read_write").plaintext
    assert run("--token", personal, "login")[0] == 0
    code, _, err = run("--team", "vision-lab", "instances", "ls")
    assert code != 0 and "gpucloud teams token vision-lab" in err
    code, out, _ = run("teams", "token", "vision-lab")
    assert code == 0 and "gpucloud --team vision-lab" in out

    code, out, _ = run("teams", "budget", "vision-lab", "dev@example.com", "5")
    assert code == 0 and "Monthly budget of dev@example.com in vision-lab: ¥5.00." in out
    assert Membership.objects.get(user=developer).monthly_budget == Decimal("5.00")
    code, _, err = run("teams", "budget", "vision-lab", "dev@example.com", "lots")
    assert code != 0 and "Enter a budget in yuan" in err

    from billing import wallet

    wallet.adjust_balance(user=team.account, amount=Decimal("50"), reason="t", staff=None, idempotency_key="cli-t")
    code, out, err = run(
        "--team",
        "vision-lab",
        "--json",
        "instances",
        "create",
        "--name",
        "lab-run",
        "--chip",
        "mlu370-x8",
        "--image",
        "pytorch-2.2-neuware",
    )
    assert code == 0, err
    assert Instance.objects.get(name="lab-run").owner == team.account
    code, out, _ = run("--team", "vision-lab", "instances", "ls")
    assert code == 0 and "lab-run" in out
    code, out, _ = run("instances", "ls")  # the personal token: the person's own instances
    assert code == 0 and "lab-run" not in out
    # The team's disks and cloud storage with the same token: the team's, paid by its wallet.
    code, out, err = run("--team", "vision-lab", "disks", "create", "lab-data", "--size", "20", "--zone", "cn-east-xc")
    assert code == 0, err
    from storage.models import CloudDisk, Entry

    assert CloudDisk.objects.get(name="lab-data").owner == team.account
    assert run("disks", "ls")[1].count("lab-data") == 0  # not among one's own
    code, out, err = run("--team", "vision-lab", "storage", "mkdir", "/datasets")
    assert code == 0, err
    assert Entry.objects.get(name="datasets").owner == team.account
