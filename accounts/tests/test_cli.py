"""The gpucloud CLI against a real HTTP server."""

import json

import pytest

from accounts import services
from cli.main import main

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def cli(live_server, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("GPUCLOUD_CONFIG", str(tmp_path / "config.json"))

    def run(*argv):
        code = main(["--url", live_server.url, "--lang", "en", *argv])
        out, err = capsys.readouterr()
        return code, out, err

    return run


def test_login_saves_the_token_and_later_commands_use_it(cli, owner, tmp_path):
    token = services.create_api_token(owner, name="cli", scope="read").plaintext
    code, out, _ = cli("--token", token, "login")
    assert code == 0 and owner.email in out
    saved = json.loads((tmp_path / "config.json").read_text())
    assert saved["token"] == token and oct((tmp_path / "config.json").stat().st_mode)[-3:] == "600"
    code, out, _ = cli("--json", "me")
    assert code == 0 and json.loads(out)["email"] == owner.email


def test_tokens_are_listed_as_a_table(cli, owner):
    token = services.create_api_token(owner, name="cli-table", scope="read").plaintext
    code, out, _ = cli("--token", token, "tokens", "ls")
    assert code == 0 and "cli-table" in out and "PREFIX" in out and token not in out


def test_a_bad_token_is_a_clear_error_and_exit_code_1(cli):
    code, _, err = cli("--token", "gpc_deadbeef_nope", "me")
    assert code == 1 and "401" in err and "Invalid or revoked API token." in err


def test_an_unreachable_console_is_a_clear_error(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("GPUCLOUD_CONFIG", str(tmp_path / "c.json"))
    assert main(["--url", "http://127.0.0.1:9", "--token", "gpc_x_y", "me"]) == 1
    assert "cannot reach" in capsys.readouterr().err
