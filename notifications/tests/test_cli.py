"""`gpucloud notifications channels ls|add|rm|test` against a real HTTP server (the console on a live server)."""

import io

import pytest

from accounts import services
from cli.main import main
from notifications.models import Channel

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def cli(live_server, tmp_path, monkeypatch, capsys, owner):
    monkeypatch.setenv("GPUCLOUD_CONFIG", str(tmp_path / "config.json"))
    token = services.create_api_token(owner, name="cli", scope="read_write").plaintext

    def run(*argv, stdin=""):
        monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
        code = main(["--url", live_server.url, "--token", token, "--lang", "en", *argv])
        out, err = capsys.readouterr()
        return code, out, err

    return run


def test_add_list_test_and_remove_a_channel(cli, receiver):
    code, out, _ = cli(
        "notifications", "channels", "add", "webhook", "ops", receiver.url(), "--with-secret", stdin="s3cret\n"
    )
    assert code == 0 and out.startswith("added ops")
    assert Channel.objects.get().secret == "s3cret"

    code, out, _ = cli("notifications", "channels", "ls")
    assert code == 0 and "ops" in out and "webhook" in out and "s3cret" not in out

    code, out, _ = cli("notifications", "channels", "test", "ops")
    assert code == 0 and "test sent to ops: 200" in out
    assert len(receiver.requests) == 1

    code, out, _ = cli("notifications", "channels", "rm", "ops")
    assert code == 0 and "deleted ops" in out and not Channel.objects.exists()


def test_a_private_url_and_an_unknown_channel_are_clear_errors(cli):
    code, _, err = cli("notifications", "channels", "add", "webhook", "x", "https://10.0.0.1/hook", "--secret", "s")
    assert code == 1 and "400" in err and "private" in err
    code, _, err = cli("notifications", "channels", "rm", "nope")
    assert code == 1 and "no channel named nope" in err


def test_a_failed_test_exits_non_zero(cli, receiver):
    receiver.status = 500
    cli("notifications", "channels", "add", "feishu", "bot", receiver.url(), "--event", "arrears")
    code, _, err = cli("notifications", "channels", "test", "bot")
    assert code == 1 and "HTTP 500" in err
